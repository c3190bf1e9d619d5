"""The programs run inside a case's venv, outside harness: the hand measurement of the
truth (a plain loop) and pytest-memray's `limit_leaks` test. psleak's driver is
benchmarks/vs_psleak.py's (`psleak_on`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

# The truth: a plain loop, no harness code. glibc's heap in use (mallinfo2's uordblks)
# and RSS after gc.collect(), before and after N calls past a warm-up (the heap at
# the half too: a one-off step, a dict resized, is not a rate per call), under
# PYTHONMALLOC=malloc with glibc's thread cache off (so every byte Python holds is a
# malloc'd byte and freed memory is not parked per thread). Time per call over the
# first and the last tenth of the calls. argv: scenario, params JSON, calls, warm-up,
# seconds cap. Prints one JSON line.
TRUTH_DRIVER = r"""
import array, ctypes, gc, importlib.util, json, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))
spec = importlib.util.spec_from_file_location("scenario", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
calls, warm, cap = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])

class M(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = M
def heap():
    gc.collect()
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
state = mod.setup(json.loads(sys.argv[2]))
for _ in range(warm):
    mod.step(state)
times = array.array("d", bytes(8 * calls))   # preallocated: the loop keeps nothing
n = 0
h0, r0 = heap(), rss()
t_end = time.perf_counter() + cap
half, hm = calls // 2, None
while n < calls and time.perf_counter() < t_end:
    t = time.perf_counter()
    mod.step(state)
    times[n] = time.perf_counter() - t
    n += 1
    if n == half:
        hm = heap()
h1, r1 = heap(), rss()
times = list(times[:n])
k = max(1, n // 10)
print(json.dumps({"calls": n, "warmup": warm, "b_per_call": (h1 - h0) / n,
                  "rss_b_per_call": (r1 - r0) / n,
                  "b_per_call_2nd_half": (h1 - hm) / (n - half) if hm is not None else None,
                  "us_per_call": 1e6 * sorted(times)[n // 2],
                  "us_per_call_first": 1e6 * sorted(times[:k])[k // 2],
                  "us_per_call_last": 1e6 * sorted(times[-k:])[k // 2]}))
"""

# pytest-memray's limit_leaks on the scenario: set-up and a warm-up outside the test
# (a module fixture), then CALLS calls inside it, failing when one location keeps more
# than LIMIT. Run with PYTHONMALLOC=malloc, as pytest-memray's docs ask for leak checks.
MEMRAY_TEST = r"""
import importlib.util, json, os, sys
import pytest
SCRIPT, PARAMS = os.environ["CORPUS_SCRIPT"], json.loads(os.environ["CORPUS_PARAMS"])
CALLS, WARM = int(os.environ["CORPUS_CALLS"]), int(os.environ["CORPUS_WARM"])
sys.path.insert(0, os.path.dirname(SCRIPT))
spec = importlib.util.spec_from_file_location("scenario", SCRIPT)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)

@pytest.fixture(scope="module")
def state():
    s = mod.setup(PARAMS)
    for _ in range(WARM):
        mod.step(s)
    return s

@pytest.mark.limit_leaks(os.environ["CORPUS_LIMIT"])
def test_step(state):
    for _ in range(CALLS):
        mod.step(state)
"""
MEMRAY_CALLS, MEMRAY_WARM, MEMRAY_LIMIT = 1000, 200, "16 KB"


def run_json(cmd: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """The last stdout line of `cmd` as JSON.

    Raises:
        RuntimeError: the program failed or printed no JSON line.
    """
    try:
        got = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"ran past {timeout:.0f} s") from exc
    lines = got.stdout.strip().splitlines()
    if got.returncode or not lines:
        raise RuntimeError(f"exit {got.returncode}: {(got.stderr or got.stdout)[-600:]}")
    return dict(json.loads(lines[-1]))


def quiet_env() -> dict[str, str]:
    """This process's environment with the heap made readable: PYTHONMALLOC=malloc,
    glibc's thread cache off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return env | {"PYTHONMALLOC": "malloc",
                  "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}


def truth(python: Path, script: Path, params: object, work: Path, calls: int = 3000,
          warmup: int = 200, cap_s: float = 30.0) -> dict[str, Any]:
    """The hand measurement of one release (see TRUTH_DRIVER).

    Raises:
        RuntimeError: the loop failed.
    """
    driver = work / "truth_driver.py"
    driver.write_text(TRUTH_DRIVER)
    return run_json([str(python), str(driver), str(script), json.dumps(params), str(calls),
                     str(warmup), str(cap_s)], quiet_env(), cap_s * 4 + 120)


def memray(python: Path, script: Path, params: object, work: Path
           ) -> tuple[str, int, float]:
    """pytest-memray's verdict: ("leak" | "stable" | "error", calls, wall s)."""
    test = work / "test_corpus_memray.py"
    test.write_text(MEMRAY_TEST)
    env = quiet_env() | {"CORPUS_SCRIPT": str(script), "CORPUS_PARAMS": json.dumps(params),
                         "CORPUS_CALLS": str(MEMRAY_CALLS), "CORPUS_WARM": str(MEMRAY_WARM),
                         "CORPUS_LIMIT": MEMRAY_LIMIT}
    del env["GLIBC_TUNABLES"]
    t0 = time.perf_counter()
    got = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--memray", str(test)], cwd=work, env=env, capture_output=True,
                         text=True, timeout=900)
    wall = time.perf_counter() - t0
    verdict = {0: "stable", 1: "leak"}.get(got.returncode, "error")
    if verdict == "leak" and "leaked" not in got.stdout.lower():
        verdict = "error"       # a test that failed for another reason is not a finding
    return verdict, MEMRAY_WARM + MEMRAY_CALLS, wall
