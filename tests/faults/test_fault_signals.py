"""Ctrl-C, SIGTERM and SIGKILL of `harness sweep` mid-cell, on Docker and locally.

Each interrupted sweep must leave no container or process behind, keep the finished
cells on disk, and `--resume` must finish with the same cells and verdicts as a sweep
that was never interrupted.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from faultkit import (
    ENGINES,
    Sweep,
    cell_done,
    cell_running,
    managed,
    run_dirs,
    run_sweep,
    scenario,
    temp_files,
    verdicts,
    wait_for,
    write_matrix,
)

from harness.matrixfile.model import abilities

# Three cells: a finished one, the one we interrupt, one not started.
SCENARIOS = [f"{{script: {scenario('slow.py')}, id: first, params: {{sleep: 0.001}}}}",
             f"{{script: {scenario('slow.py')}, id: second, "
             f"params: {{sleep: 0.01}}}}",
             f"{{script: {scenario('slow.py')}, id: third, params: {{sleep: 0.001}}}}"]


def _matrix(tmp: Path, runtime: str) -> Path:
    return write_matrix(tmp, SCENARIOS, runtime=runtime)


def _label(runtime: str) -> str:
    # faultkit names the local image
    return "bookworm" if abilities(runtime).container_images else "python"


def _interrupt_and_resume(tmp: Path, runtime: str, sig: int, reference: dict[str, str]) -> None:
    m = _matrix(tmp, runtime)
    out = tmp / "out"
    lab = _label(runtime)
    sweep = Sweep(m, out)
    try:
        wait_for("the second cell to run", lambda: cell_done(out, f"{lab}.cpu.first")
                 and cell_running(out, f"{lab}.cpu.second"), timeout=90)
        if sig == signal.SIGINT:
            sweep.signal_group(sig)      # a terminal's Ctrl-C: the whole foreground group
        else:
            sweep.proc.send_signal(sig)  # `kill PID`
        code = sweep.wait(60)
    finally:
        sweep.kill()
    err = sweep.stderr
    assert code == 130, err
    assert "--resume" in err and "Traceback" not in err
    if abilities(runtime).container_images:
        assert managed(sweep.proc.pid, runtime=runtime) == [], \
            "the running container was left behind"
    [root] = run_dirs(out)
    assert (root / "cells" / f"{lab}.cpu.first" / "result.json").exists()
    assert not (root / "cells" / f"{lab}.cpu.second" / "result.json").exists()
    assert not (root / "cells" / f"{lab}.cpu.third").exists()
    assert temp_files(root) == []
    code, err = run_sweep(m, out, "--resume", "-q")
    assert code == 0, err
    assert "Traceback" not in err
    assert verdicts(out) == reference


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, str]]:
    """The verdicts of one whole sweep of `_matrix` per runtime, swept when first asked
    for (so only a test marked for its engine starts one)."""
    done: dict[str, dict[str, str]] = {}

    def of(runtime: str) -> dict[str, str]:
        if runtime not in done:
            tmp = tmp_path_factory.mktemp(f"ref-{runtime}")
            code, err = run_sweep(_matrix(tmp, runtime), tmp / "out", "-q")
            assert code == 0, err
            done[runtime] = verdicts(tmp / "out")
        return done[runtime]

    return of


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_docker_interrupt_then_resume(tmp_path: Path, sig: int,
                                      reference: Callable[[str], dict[str, str]]) -> None:
    assert set(reference("docker").values()) == {"ok"}
    _interrupt_and_resume(tmp_path, "docker", sig, reference("docker"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_local_interrupt_then_resume(tmp_path: Path, sig: int,
                                     reference: Callable[[str], dict[str, str]]) -> None:
    assert set(reference("local").values()) == {"ok"}
    _interrupt_and_resume(tmp_path, "local", sig, reference("local"))


@pytest.mark.podman
def test_podman_interrupt_then_resume(tmp_path: Path,
                                      reference: Callable[[str], dict[str, str]]) -> None:
    """Ctrl-C of a podman sweep removes its running container, as on docker."""
    assert set(reference("podman").values()) == {"ok"}
    _interrupt_and_resume(tmp_path, "podman", signal.SIGINT, reference("podman"))


@pytest.mark.parametrize("engine", ENGINES)
def test_container_sigkill_orphan_is_removed_and_resume_completes(
        tmp_path: Path, engine: str, reference: Callable[[str], dict[str, str]]) -> None:
    expected = reference(engine)
    m = _matrix(tmp_path, engine)
    out = tmp_path / "out"
    sweep = Sweep(m, out)
    try:
        wait_for("the second cell to run", lambda: cell_running(out, "bookworm.cpu.second"))
        sweep.proc.send_signal(signal.SIGKILL)  # the harness only: its container lives on
        sweep.wait(30)
    finally:
        sweep.kill()
    orphans = managed(sweep.proc.pid, runtime=engine)
    # SIGKILL cannot clean up: the container lives on, unless a harness started since
    # removed it as an orphan (a sweep of another xdist worker on the same engine: the
    # rule --resume applies below; a CI run under -n 4 saw it)
    assert len(orphans) <= 1, orphans
    resumed = Sweep(m, out, "--resume")
    code = resumed.wait(150)
    assert code == 0, resumed.stderr
    assert managed(sweep.proc.pid, resumed.proc.pid, runtime=engine) == []
    assert verdicts(out) == expected
    [root] = run_dirs(out)
    assert temp_files(root) == []
