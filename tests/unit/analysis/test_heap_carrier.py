"""The Python heap lies inside the USS. Where both leak and the heap holds most of the
USS's growth, the leak is named for the heap (the narrower carrier, whose line
tracemalloc names): on a busy CI host the USS's tracing and allocator pages made it grow
+1.2 KiB a call over the heap's +1.1, and the words said "uss grows" for a plain Python
list that keeps 1 KiB a call. A USS that grows far past the heap is named for the USS."""

from __future__ import annotations

import pytest

from harness.analysis.memory import leak_reason
from harness.analysis.records import MemoryTrend
from harness.analysis.rules import HEAP_HOLDS, leaking


def trend(source: str, slope: float) -> MemoryTrend:
    return MemoryTrend(source, 120, slope, slope * 0.98, slope * 1.02, slope * 1000, slope,
                       slope * 0.98, slope * 1.02, 1e7, 1e7 + slope * 1000,
                       1e7 + slope * 1000, "leak", floor=65536.0)


@pytest.mark.parametrize(("heap", "uss", "first"), [
    (1126.0, 1229.0, "heap"),          # the CI case: the heap holds ~92 % of it
    (1126.0, 1126.0, "heap"),          # a tie keeps the order of CARRIERS
    (1229.0, 1126.0, "heap"),
    (100.0, 100.0 / HEAP_HOLDS * 1.5, "uss+rss"),   # most of it outside the heap
    (100.0, 200.0, "uss+rss"),         # half of it outside the heap
    (320.6, 322.2, "heap"),            # an H100 run's cuFFT plan cache (sweep-1123)
])
def test_the_carrier_named_first(heap: float, uss: float, first: str) -> None:
    memory = {"heap": trend("heap", heap), "uss": trend("uss", uss),
              "rss": trend("rss", uss)}
    found = leaking(memory)
    assert found[0][0] == first and {n for n, _ in found} == {"heap", "uss+rss"}
    words = leak_reason(found, 1000)
    assert words.startswith("heap grows" if first == "heap" else "uss+rss grows")
    assert "; also " in words
