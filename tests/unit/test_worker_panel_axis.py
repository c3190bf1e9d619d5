"""Issue 87 item 1's panel: a worker processes' memory panel in report.html drew its axis
from -9 MiB (its USS began near 0, its row's span larger): bytes are never below zero,
so the axis starts at 0 at the lowest."""

from __future__ import annotations

import re

from harness.protocol.series import Series
from harness.report.html import memory_plot


def test_a_memory_panel_never_draws_negative_bytes() -> None:
    samples = [{"src": "timer", "phase": "measure", "i": i, "kids": 4096 * i}
               for i in range(1, 60)]
    svg = str(memory_plot(Series(samples=samples), "kids", "kids", None,
                          span=40 * 1024 * 1024))
    labels = re.findall(r">([^<]*B)</text>", svg)
    assert labels and not any(label.strip().startswith(("-", "\u2212")) for label in labels), \
        labels
