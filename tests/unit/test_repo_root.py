"""Issue 42 item 8: the repository root held an empty tracked file `oom`. Every file
tracked at the root has content (the run-wide check that no test leaves a new file there
is in tests/conftest.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_no_empty_file_is_tracked_at_the_root() -> None:
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip("not a git checkout")
    top = [name for name in done.stdout.split("\0") if name and "/" not in name]
    empty = [name for name in top if (ROOT / name).is_file()
             and (ROOT / name).stat().st_size == 0]
    assert empty == [], f"empty files tracked at the repository root: {empty}"
