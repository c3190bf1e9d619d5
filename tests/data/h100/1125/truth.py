"""The truth of a GPU scenario, measured without harness: a plain loop over the
scenario's setup() and step(), reading at every checkpoint the Python heap (tracemalloc),
RSS (/proc/self/statm), the framework allocator (the scenario's fw_bytes()), this
process's device memory (NVML) and the time per call since the last checkpoint.

    python3 truth.py SCENARIO.py '{"param": value}' CALLS EVERY > truth-NAME.jsonl

With TRUTH_HEAP=malloc the heap is glibc's mallinfo2() (every allocation in the process,
native ones too; run it under PYTHONMALLOC=malloc so Python's go through malloc), read
after a gc.collect(), instead of tracemalloc's (Python's allocations alone).
"""
import gc
import importlib.util
import json
import os
import sys
import time
import tracemalloc

MALLOC = os.environ.get("TRUTH_HEAP") == "malloc"


def malloc_heap():
    import ctypes

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    gc.collect()
    m = libc.mallinfo2()
    return int(m.uordblks + m.hblkhd)


def nvml_used():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid():
                return int(p.usedGpuMemory or 0)
    except Exception:
        return None
    return 0


def heap():
    return malloc_heap() if MALLOC else tracemalloc.get_traced_memory()[0]


def main():
    path, params = sys.argv[1], json.loads(sys.argv[2])
    calls, every = int(sys.argv[3]), int(sys.argv[4])
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("scenario", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    state = mod.setup(params)
    page = os.sysconf("SC_PAGE_SIZE")
    if not MALLOC:
        tracemalloc.start()
    t0 = time.perf_counter()
    for i in range(1, calls + 1):
        mod.step(state)
        if i % every == 0 or i == calls:
            t = time.perf_counter()
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * page
            fw = mod.fw_bytes(state) if hasattr(mod, "fw_bytes") else None
            print(json.dumps({"call": i, "heap": heap(), "rss": rss,
                              "fw": fw, "nvml": nvml_used(),
                              "us_per_call": round((t - t0) / every * 1e6, 1)}), flush=True)
            t0 = time.perf_counter()
    gc.collect()
    print(json.dumps({"after_collect_heap": heap()}), flush=True)


main()
