"""tools/cpu_per_test.py, the suite's CPU per test: its cgroup count holds what a test's
processes used, and its summary adds the rows up per file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loadfile import load_file

ROOT = Path(__file__).resolve().parents[2]
cpu_per_test = load_file(ROOT / "tools" / "cpu_per_test.py", "cpu_per_test_under_test")

GROUP = Path("/sys/fs/cgroup/cpuacct")
BURN = 0.5    # CPU seconds a test's child spends


def test_the_summary_adds_up_files_and_says_the_run(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"id": "tests/a.py::one", "wall": 2.0, "cpu": 1.5, "process": 0.5,
             "containers": 1.0, "sys": 0.25},
            {"id": "tests/a.py::two", "wall": 1.0, "cpu": 0.25, "process": 0.25,
             "containers": 0.0},
            {"id": "tests/b.py::three", "wall": 0.5, "cpu": 3.0, "process": 3.0,
             "containers": 0.0, "sys": 1.0},
            {"run_wall": 9.0, "run_busy": 12.0, "unattributed_containers": 2.0}]
    out = tmp_path / "rows.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cpu_per_test.main(str(out))
    text = capsys.readouterr().out
    assert ("3 tests: 5 CPU-s (1 in containers), the kernel 1 of the processes, 4 s of "
            "tests' wall time") in text
    assert "the whole run: 9 s, the machine busy 12 CPU-s" in text
    assert "containers that mount no test's folder 2 CPU-s" in text
    files = [line.split() for line in text.splitlines() if line.endswith(".py")]
    assert files == [["3.0", "0.0", "0.5", "tests/b.py"], ["1.8", "1.0", "3.0", "tests/a.py"]]


@pytest.mark.skipif(not os.access(GROUP, os.W_OK) or not (GROUP / "cpuacct.usage").exists(),
                    reason="needs a writable cgroup v1 cpuacct hierarchy (root)")
def test_a_tests_child_process_is_counted_in_its_group(tmp_path: Path) -> None:
    # what a test's child process spends is in the test's row: the group of the pytest
    # process that ran the test holds every process it started
    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\n"
        "def test_burn():\n"
        "    subprocess.Popen([sys.executable, '-c', 'import os, time\\n'\n"
        f"        'end = time.process_time() + {BURN}\\n'\n"
        "        'while time.process_time() < end: pass\\n'\n"
        "        'os._exit(0)']).wait()\n"
        "def test_idle():\n"
        "    pass\n")
    out = tmp_path / "rows.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tools"), "CPU_PER_TEST_OUT": str(out)}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "cpu_per_test",
                           "-p", "no:cacheprovider", "-p", "no:xdist", "test_burn.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["id"].split("::")[1]: r for r in map(json.loads, out.read_text().splitlines())
            if "id" in r}
    assert rows["test_burn"]["process"] >= BURN * 0.9, rows
    assert rows["test_idle"]["process"] < BURN / 2, rows
    # the kernel's share of a test's CPU is a part of it (this loop's is large: each
    # process_time() is a system call)
    assert 0 < rows["test_burn"]["sys"] <= rows["test_burn"]["process"], rows
