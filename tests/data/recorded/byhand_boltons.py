"""Truth by hand for the `boltons.cpu.*` series (README.md): run from boltons' root,
`PYTHONMALLOC=malloc python byhand_boltons.py test_guiderator test_pairwise_filled`."""

import ctypes
import gc
import importlib
import sys
import tracemalloc

sys.path[:0] = ["tests", "."]
test_iterutils = importlib.import_module("test_iterutils")

libc = ctypes.CDLL(None)


def rss() -> int:
    libc.malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


for name in sys.argv[1:]:
    fn = getattr(test_iterutils, name)
    for _ in range(2000):
        fn()
    gc.collect()
    r0 = rss()
    marks = []
    for _ in range(6):
        for _ in range(50000):
            fn()
        gc.collect()
        marks.append(round((rss() - r0) / 1024))
    tracemalloc.start()
    fn()
    gc.collect()
    h0 = tracemalloc.get_traced_memory()[0]
    for _ in range(20000):
        fn()
    gc.collect()
    h1 = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(name, "RSS KiB after each 50,000 calls:", marks,
          f"heap B/call over 20,000 (tracemalloc): {(h1 - h0) / 20000:.3f}")
