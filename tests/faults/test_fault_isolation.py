"""Isolation of a cell: no network unless asked, never privileged, no host PID/IPC,
agent and scenario read-only, only the cell's own directory writable; no shell strings
anywhere in the harness."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from faultkit import REPO, Sweep, cell_running, managed, run_dirs, scenario, wait_for, write_matrix


def _inspect_running(tmp: Path, extra: str = "") -> tuple[dict[str, Any], Path]:
    m = write_matrix(tmp, [f"{{script: {scenario('slow.py')}, params: {{sleep: 0.02}}{extra}}}"])
    out = tmp / "out"
    sweep = Sweep(m, out, "-q")
    try:
        wait_for("the cell to run", lambda: cell_running(out, "bookworm.cpu.slow"))
        [c] = wait_for("its container", lambda: managed(sweep.proc.pid))
        c.reload()
        attrs: dict[str, Any] = c.attrs
    finally:
        sweep.kill()
    [root] = run_dirs(out)
    return attrs, root / "cells" / "bookworm.cpu.slow"


@pytest.mark.docker
def test_container_is_isolated_by_default(tmp_path: Path) -> None:
    attrs, cell_dir = _inspect_running(tmp_path)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert attrs["Config"].get("NetworkDisabled") is True
    assert host["Privileged"] is False
    assert host.get("PidMode") in ("", None)
    assert host.get("IpcMode") not in ("host",)
    assert not host.get("CapAdd")
    assert not host.get("Devices")
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert set(mounts) == {"/harness/agent", "/harness/scenario", "/harness/out"}
    assert mounts["/harness/agent"]["RW"] is False
    assert mounts["/harness/scenario"]["RW"] is False
    assert mounts["/harness/out"]["RW"] is True
    assert Path(mounts["/harness/out"]["Source"]) == cell_dir.resolve()
    assert isinstance(attrs["Config"]["Cmd"], list) and attrs["Config"]["Entrypoint"] in (None, [])


@pytest.mark.docker
def test_network_is_opt_in_per_scenario(tmp_path: Path) -> None:
    attrs, _ = _inspect_running(tmp_path, ", network: true")
    assert attrs["HostConfig"]["NetworkMode"] != "none"
    assert attrs["HostConfig"]["Privileged"] is False


def _calls(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = (f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute)
                    and isinstance(f.value, ast.Name) else getattr(f, "id", ""))
            out.append((name, node))
    return out


def test_no_shell_strings_anywhere() -> None:
    bad = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for name, call in _calls(tree):
            where = f"{path.relative_to(REPO)}:{call.lineno}"
            if name in ("os.system", "os.popen", "subprocess.getoutput",
                        "subprocess.getstatusoutput", "os.execl", "os.spawnl"):
                bad.append(f"{where} {name}")
            for kw in call.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant)
                                              and kw.value.value is False):
                    bad.append(f"{where} shell=")
            if name.startswith("subprocess.") and call.args and isinstance(
                    call.args[0], ast.Constant | ast.JoinedStr):
                bad.append(f"{where} {name} with a command string")
    assert bad == []
