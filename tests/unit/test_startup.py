"""Issue 15 point 7: start-up. `harness --help` imports nothing heavy; a sweep imports
docker-py without paramiko (unless an ssh:// engine needs it) and no SciPy at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _modules_after(code: str) -> set[str]:
    code += "\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    return set(out.stdout.split())


def test_help_imports_nothing_heavy_and_is_fast() -> None:
    mods = _modules_after("from harness.cli import main\n"
                          "try:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    heavy = {"numpy", "scipy", "docker", "requests", "jinja2", "tabulate", "paramiko", "rich"}
    # What made --help slow was these imports; its time is measured side by side by
    # benchmarks/cell_overhead.py, never asserted here (a loaded machine takes seconds).
    assert not heavy & mods, heavy & mods


def test_verdicts_need_no_scipy() -> None:
    mods = _modules_after("import harness.analysis.verdict, harness.orchestrator, "
                          "harness.report")
    assert "scipy" not in mods


def test_docker_is_imported_without_paramiko_until_ssh_is_asked_for() -> None:
    mods = _modules_after(
        "from harness.runtimes import get_runtime\nget_runtime('docker')\n"
        "import docker.api.client\nassert not hasattr(docker.api.client, 'SSHHTTPAdapter')\n"
        "import sys\nassert 'paramiko' not in sys.modules")
    assert "docker" in mods and "paramiko" not in mods
    mods = _modules_after(
        "from harness.runtimes import get_runtime\nget_runtime('docker')\n"
        "from harness.runtimes.dockerlib import enable_ssh\nenable_ssh()\n"
        "import docker.api.client\nassert docker.api.client.SSHHTTPAdapter")
    assert "paramiko" in mods
