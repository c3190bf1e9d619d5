"""`runtime: podman` against podman's Docker-compatible service and the offline base image.

Needs `harness-test/base:bookworm` in podman (`bash images/setup-podman.sh` copies it in
from Docker). Marked `podman`: skipped without the service unless
HARNESS_REQUIRE_PODMAN=1 (CI), where it fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from harness.cli import main
from harness.runtimes.base import LABEL
from harness.runtimes.podman import default_socket
from tests.resultkit import held_ok

pytestmark = pytest.mark.podman
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).parent / "scenarios"


def results(out: Path) -> dict[str, dict]:
    files = list(out.glob("*/*/results.json"))
    assert len(files) == 1, files
    cells: dict[str, dict] = json.loads(files[0].read_text())["cells"]
    return cells


def no_leftovers() -> None:
    """No container of this process is left on podman."""
    client = docker.DockerClient(base_url=default_socket(), version="1.41")  # not /version
    mine = [LABEL, f"harness.host={socket.gethostname()}", f"harness.pid={os.getpid()}"]
    assert client.containers.list(all=True, filters={"label": mine}) == []


def matrix(tmp_path: Path, scenarios: str) -> Path:
    m = tmp_path / "m.yaml"
    m.write_text(f"""
name: pm
runtime: podman
defaults: {{iterations: 300, warmup: 20, sample_every: 10, timeout: 60s}}
matrix:
  image: [harness-test/base:bookworm]
  gpu: [none]
  scenario:
{scenarios}
""")
    return m


def test_the_podman_example_finds_the_leak_and_the_stable_cell(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "scenarios", tmp_path / "scenarios")
    shutil.copy(ROOT / "examples" / "podman-base.yaml", tmp_path / "m.yaml")
    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "m.yaml"), "--out", str(out), "-q"]) == 1
    cells = results(out)
    leak, flat = cells["bookworm.cpu.memo_unbounded"], cells["bookworm.cpu.memo_lru"]
    assert leak["verdict"] == "leak", leak["reason"]
    assert leak["runtime"] == "podman"
    assert held_ok(flat), flat["reason"]
    # the cell ran in a cgroup of its own, under the matrix's limit
    assert leak["outcome"]["mem_limit_bytes"] == 256 * 2**20
    # the host sampled each cell's cgroup from its files, the first sample at once (not
    # from podman's stats stream, which gave usage and limit alone, every 5 s)
    for cid in (leak["id"], flat["id"]):
        [result] = out.glob(f"*/*/cells/{cid}/result.json")
        samples = json.loads(result.read_text())["host_samples"]
        assert len(samples) >= 1, cid
        assert all(s["usage"] > 0 and s["rss"] >= 0 and s["max_usage"] >= s["usage"] and
                   s["limit"] == 256 * 2**20 for s in samples), (cid, samples)
    assert leak["image"]["digest"]
    no_leftovers()


def test_oom_timeout_and_crash_outcomes(tmp_path: Path) -> None:
    m = matrix(tmp_path, f"""    - {{script: {SCENARIOS / 'leaky.py'}, id: big, mem-limit: 48m,
         iterations: 5000, params: {{bytes: 1048576}}}}
    - {{script: {SCENARIOS / 'hang.py'}, timeout: 4s}}
    - {SCENARIOS / 'raises.py'}""")
    out = tmp_path / "out"
    assert main(["sweep", str(m), "--out", str(out), "-q"]) == 1
    cells = results(out)
    big = cells["bookworm.cpu.big"]
    assert big["verdict"] == "oom", big["reason"]
    assert big["outcome"]["exit_code"] == 137 and big["outcome"]["oom_killed"]
    hang = cells["bookworm.cpu.hang"]
    assert hang["verdict"] == "timeout" and not hang["outcome"]["oom_killed"]
    assert hang["outcome"]["duration_s"] < 30
    raised = cells["bookworm.cpu.raises"]
    assert raised["verdict"] == "crash"
    assert "scenario exploded on purpose" in raised["reason"]
    no_leftovers()


def test_no_network_and_no_privileges(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('''import json, os, socket


def setup(params):
    ifaces = sorted(name for _, name in socket.if_nameindex())
    caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
    with open(os.environ["PROBE_OUT"], "w") as f:
        json.dump({"ifaces": ifaces, "cap_eff": caps}, f)
    return {}


def step(state):
    pass
''')
    seen = tmp_path / "seen"
    seen.mkdir()
    m = tmp_path / "m.yaml"
    m.write_text(f"""
name: pm
runtime: podman
defaults: {{iterations: 50, warmup: 5, timeout: 60s, env: {{PROBE_OUT: /harness/out/probe.json}}}}
matrix:
  image: [harness-test/base:bookworm]
  gpu: [none]
  scenario: [{probe}]
""")
    out = tmp_path / "out"
    main(["sweep", str(m), "--out", str(out), "-q"])
    found = list(out.glob("*/*/cells/*/probe.json"))
    assert len(found) == 1, found
    facts = json.loads(found[0].read_text())
    assert facts["ifaces"] == ["lo"]                       # network off
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    full = (1 << (last + 1)) - 1
    assert int(facts["cap_eff"], 16) != full                # not privileged
    no_leftovers()


def _doctor(env: dict[str, str]) -> tuple[int, str]:
    """`harness doctor` on the example, as a user runs it (its own process)."""
    done = subprocess.run([sys.executable, "-m", "harness", "doctor",
                           str(ROOT / "examples" / "podman-base.yaml")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, check=False)
    return done.returncode, done.stdout + done.stderr


def test_doctor_says_what_podman_lacks(tmp_path: Path) -> None:
    code, said = _doctor({})
    assert code == 0, said
    assert "Podman " in said and "image harness-test/base:bookworm" in said
    code, said = _doctor({"HARNESS_PODMAN_HOST": f"unix://{tmp_path}/none.sock"})
    assert code == 3, said
    assert f"no podman service answers at unix://{tmp_path}/none.sock" in said
    assert f"podman system service --time=0 unix://{tmp_path}/none.sock" in said
    assert "Traceback" not in said
