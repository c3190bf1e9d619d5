"""The results directory fails: disk full, read-only (from the start or mid-sweep), and
two sweeps writing the same directory. Each is a clear message and exit 3, with no
half-written result file (writes go through a temporary file and a rename)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultkit import (
    Sweep,
    cell_done,
    cell_running,
    run_dirs,
    run_sweep,
    scenario,
    temp_files,
    wait_for,
    write_matrix,
)

FAST = [f"{{script: {scenario('slow.py')}, id: a, params: {{sleep: 0.001}}}}",
        f"{{script: {scenario('slow.py')}, id: b, params: {{sleep: 0.01}}}}"]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _complete_results(root: Path) -> None:
    """Every result file on disk is whole JSON; no temporary file is left."""
    assert temp_files(root) == [], temp_files(root)
    for p in root.rglob("result*.json"):
        json.loads(p.read_text())


def test_disk_full_is_exit_3_with_no_half_files(tmp_path: Path, tmpfs: Path) -> None:
    # Fill the tmpfs but for a few KiB: the matrix copy fits, the cell's files do not.
    m = write_matrix(tmp_path, FAST, runtime="local")
    filler = tmpfs / "filler"
    with filler.open("wb") as f, contextlib.suppress(OSError):
        f.write(b"\0" * (64 * 1024 - 6 * 1024))
    code, err = run_sweep(m, tmpfs, "-q")
    assert code == 3, err
    assert "disk is full" in err or "No space left" in err, err
    assert "Traceback" not in err, err
    _complete_results(tmpfs)


def test_read_only_results_dir_is_exit_3(tmp_path: Path, tmpfs: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    m = write_matrix(tmp_path, FAST, runtime="local")
    code, err = run_sweep(m, tmpfs, "-q")
    assert code == 3, err
    assert "read-only" in err.lower() and "--out" in err, err
    assert "Traceback" not in err, err


def test_disk_fills_up_mid_sweep(tmp_path: Path, tmpfs: Path) -> None:
    m = write_matrix(tmp_path, [*FAST[:1], f"{{script: {scenario('slow.py')}, id: b, "
                                            f"iterations: 2000, params: {{sleep: 0.002}}}}"],
                     runtime="local", defaults="{iterations: 100, warmup: 5, sample_every: 50, "
                     "timeout: 60s}")
    sweep = Sweep(m, tmpfs)
    try:
        wait_for("cell a done, b running", lambda: cell_done(tmpfs, "python.cpu.a", ) and
                 cell_running(tmpfs, "python.cpu.b"), timeout=60)
        # (remount,ro is refused while the agent has its file open: fill the disk instead)
        with (tmpfs / "filler").open("wb") as f, contextlib.suppress(OSError):
            f.write(b"\0" * (64 * 1024))
        code = sweep.wait(90)
    finally:
        sweep.kill()
    err = sweep.stderr
    assert code == 3, err
    assert "disk is full" in err, err
    assert "Traceback" not in err, err
    _complete_results(tmpfs)
    [root] = run_dirs(tmpfs)
    assert json.loads((root / "cells" / "python.cpu.a" / "result.json").read_text())["verdict"]


def test_two_sweeps_on_one_results_dir(tmp_path: Path) -> None:
    m = write_matrix(tmp_path, [f"{{script: {scenario('slow.py')}, params: {{sleep: 0.02}}}}"],
                     runtime="local")
    out = tmp_path / "out"
    first = Sweep(m, out)
    try:
        wait_for("the first sweep to run", lambda: cell_running(out, "python.cpu.slow"))
        code, err = run_sweep(m, out, "--resume", "-q")   # the same (newest) directory
        assert code == 3, err
        assert "in use by pid" in err and str(first.proc.pid) in err and "fix:" in err, err
        assert "Traceback" not in err
        assert first.wait(60) == 0, first.stderr
    finally:
        first.kill()
    # Once the first has finished, the directory is free again.
    code, err = run_sweep(m, out, "--resume", "-q")
    assert code == 0, err


def test_cell_dir_on_a_read_only_fs_is_a_store_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from harness.errors import StoreError
    from harness.store.results import RunStore

    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    store = RunStore(tmp_path)
    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(StoreError, match="read-only"):
        store.cell_dir("x.cpu.y", fresh=True)
