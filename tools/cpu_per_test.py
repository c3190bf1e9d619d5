"""Where the test suite's CPU goes: each test's wall time and the machine's busy CPU
seconds while it ran (its containers, engines and child processes included, which a
process's own rusage does not see).

Run the suite serially (no -n: one test at a time, so the machine's CPU is the test's)
with this file as a plugin, then summarise:

    PYTHONPATH=tools python3 -m pytest -p cpu_per_test -q      (writes cpu-per-test.jsonl)
    python3 tools/cpu_per_test.py cpu-per-test.jsonl           (per file and per test)

Under `pytest -n 4` on 2 cores the suite is CPU-bound (idle under 5 % for most of a run,
sampled from /proc/stat every 10 s), so its wall time follows the CPU seconds this
counts, not the tests' wall times. CPU_PER_TEST_OUT names another output file.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

OUT = os.environ.get("CPU_PER_TEST_OUT", "cpu-per-test.jsonl")


def busy_seconds() -> float:
    """The machine's non-idle CPU seconds since boot, summed over its CPUs."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


try:
    import pytest
except ImportError:  # summarising needs no pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
        t0, c0 = time.monotonic(), busy_seconds()
        yield
        with open(OUT, "a") as f:
            f.write(json.dumps({"id": item.nodeid, "wall": time.monotonic() - t0,
                                "cpu": busy_seconds() - c0}) + "\n")


def main(path: str, top: int = 30) -> None:
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    by_file: Counter[str] = Counter()
    wall: Counter[str] = Counter()
    for r in rows:
        name = r["id"].split("::")[0]
        by_file[name] += r["cpu"]
        wall[name] += r["wall"]
    print(f"{len(rows)} tests: {sum(r['cpu'] for r in rows):.0f} CPU-s, "
          f"{sum(r['wall'] for r in rows):.0f} s")
    print(" CPU-s  wall-s  file")
    for name, cpu in by_file.most_common(top):
        print(f"{cpu:6.1f} {wall[name]:7.1f}  {name}")
    print(" CPU-s  wall-s  test")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        print(f"{r['cpu']:6.1f} {r['wall']:7.1f}  {r['id']}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else OUT)
