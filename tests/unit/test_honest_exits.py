"""Issue 28 item 4: an honest exit on every path (a closed pipe, a cut-short samples
file, a fit param the scenario never reads, a timeout on every image, compare)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "tests" / "data" / "h100"


def reader_leaves(argv: list[str]) -> tuple[int, str]:
    """`harness ARGV | head -0`: the exit code and stderr of a command whose reader
    closed the pipe before reading a byte (as `| head -1` does to an answer longer
    than the pipe holds)."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv],
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode()


@pytest.mark.parametrize("argv", [[], ["--format", "console"]])
def test_a_reader_that_leaves_keeps_the_answers_exit_code(tmp_path: Path,
                                                          argv: list[str]) -> None:
    # GIVEN a recorded run with leaks in it (its exit code is 1, whoever reads it)
    run = Path(shutil.copytree(H100 / "gpu-real", tmp_path / "gpu-real"))
    whole = subprocess.run([sys.executable, "-m", "harness", "report", str(run), *argv],
                           env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, check=False)
    # WHEN the reader closes the pipe before reading
    code, err = reader_leaves(["report", str(run), *argv])
    # THEN the command exits as it does when read whole, and says nothing of the pipe
    assert code == whole.returncode, err
    assert code == (1 if not argv else 0)
    assert "Traceback" not in err and "Exception ignored" not in err and "Broken" not in err
