"""Leak in the workers: a multiprocessing pool (2 forked workers, kept for the whole run)
whose task keeps 4 KiB in the worker that ran it (a module-level list there, as a
per-process cache with no bound or a handler list appended per task does), while the
caller keeps nothing: the caller's heap and USS stay flat, the workers' USS grows
~4 KiB per call (issue 61 point 1: a leak a tool that reads the caller alone calls
clean). Truth "leak": the workers' USS, summed, +5.5 KiB/call over 3000 calls (4.4 KiB/call
in their second half, 4.6 KiB/call over 10,000); the caller's heap flat (+13 B/call,
under harness's 16 B/call floor).

Measured by hand by the loop at the bottom of this file (`python3 <this file>`): glibc's
heap of the caller (mallinfo2, after gc.collect()) and the USS (Private_Clean +
Private_Dirty of /proc/PID/smaps_rollup) of the caller and of its children, before and
after N calls past a warm-up, no harness code.
"""

CASE = {
    "title": "multiprocessing pool workers keep 4 KiB of every task; the caller stays flat",
    "kind": "leak",
    "link": "https://docs.python.org/3/library/multiprocessing.html#module-multiprocessing.pool",
    "package": None,
    "versions": {"bad": "3.11"},
    "extra": [],
    "params": {"workers": 2, "size": 4096},
    "truth": {
        "3.11": {"b_per_call": 5651.1, "b_per_call_2nd_half": 4461.9,
                 "heap_b_per_call": 12.6, "uss_b_per_call": 143.4, "us_per_call": 64.6},
    },
    "measured": (
        "PYTHONMALLOC=malloc GLIBC_TUNABLES=glibc.malloc.tcache_count=0 python3 "
        "benchmarks/corpus/leak_pool_worker_keeps.py 3000 200 (Python 3.11.7, 2 cores): "
        "the loop at the bottom of the file; b_per_call: the workers' USS summed "
        "(/proc/PID/smaps_rollup, Private_*) over 3000 calls after 200 warm-up calls; "
        "heap_b_per_call: the caller's glibc heap (mallinfo2 after gc.collect()); "
        "uss_b_per_call: the caller's own USS (page noise); median time per call. "
        "Over 10000 calls: 4706 B/call (4239 in their second half), heap 9.6 B/call"
    ),
}

KEPT = []


def keep(size):
    KEPT.append(bytearray(size))      # in the worker: kept for good
    return len(KEPT)


def setup(params):
    import multiprocessing
    import sys
    import types
    # A task is pickled by reference to its module: a loader that did not register
    # this file as a module (a plain exec) gets one, so the forked workers find `keep`
    if keep.__module__ not in sys.modules:
        shim = types.ModuleType(keep.__module__)
        shim.keep = keep
        sys.modules[keep.__module__] = shim
    pool = multiprocessing.get_context("fork").Pool(int(params.get("workers", 2)))
    return {"pool": pool, "size": int(params.get("size", 4096))}


def step(state):
    state["pool"].apply(keep, (state["size"],))


# No teardown: the pool ends with the interpreter, after the last sample (a worker
# gone in teardown would be missing from a sample taken there).


def _truth(calls=3000, warmup=200):
    """The hand measurement (see the docstring): one JSON line."""
    import array
    import ctypes
    import gc
    import json
    import os
    import statistics
    import time

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2

    def heap():
        gc.collect()
        m = libc.mallinfo2()
        return m.uordblks + m.hblkhd

    def uss(pid):
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) * 1024 for line in f
                       if line.startswith(("Private_Clean:", "Private_Dirty:")))

    def children():
        me = str(os.getpid())
        pids = []
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{name}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[1] == me:
                        pids.append(int(name))
            except (OSError, IndexError):
                pass
        return sum(uss(p) for p in pids)

    state = setup(CASE["params"])
    for _ in range(warmup):
        step(state)
    h0, u0, k0 = heap(), uss(os.getpid()), children()
    times, km = array.array("d", bytes(8 * calls)), None   # preallocated: keeps nothing
    for n in range(calls):
        t = time.perf_counter()
        step(state)
        times[n] = time.perf_counter() - t
        if n + 1 == calls // 2:
            km = children()
    h1, u1, k1 = heap(), uss(os.getpid()), children()
    print(json.dumps({
        "b_per_call": round((k1 - k0) / calls, 1),
        "b_per_call_2nd_half": round((k1 - km) / (calls - calls // 2), 1),
        "heap_b_per_call": round((h1 - h0) / calls, 1),
        "uss_b_per_call": round((u1 - u0) / calls, 1),
        "us_per_call": round(statistics.median(times) * 1e6, 1)}))
    state["pool"].terminate()


if __name__ == "__main__":
    import sys
    _truth(*[int(a) for a in sys.argv[1:3]])
