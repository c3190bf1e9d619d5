"""Issue 63 item 14: the smaller words a reader meets, each said once and right."""

from __future__ import annotations

import re
from pathlib import Path

from harness.analysis.records import rate_text, rate_words
from harness.days.journey import STEPS


def test_a_rate_of_megabytes_a_call_is_said_in_mib() -> None:
    # "+51204.0 KiB/call" was the table's and the reason's words for 50 MiB a call
    assert rate_words(51204 * 1024.0) == "+50.0 MiB/call"
    assert rate_words(5 * 2**20, 4.9 * 2**20, 5.1 * 2**20) == "+5.0 MiB/call (CI +4.9..+5.1)"
    assert rate_text(51204 * 1024.0, 2) == "+50.00 MiB/call"
    # under 1 MiB a call, KiB as before; under 1 KiB, bytes
    assert rate_words(5.4 * 1024) == "+5.4 KiB/call"
    assert rate_text(0.0) == "+0.0 KiB/call" and rate_text(-1e-9) == "+0.0 KiB/call"
    assert rate_words(84.0, 83.0, 85.0) == "+84 B/call (CI +83..+85)"


def test_the_docs_number_find_cause_steps_as_it_does() -> None:
    # `--find-cause` printed "[4/6 code]" where docs/commands.md and docs/asof.md showed
    # five steps: every "[n/m step]" the docs show is the journey's own
    root = Path(__file__).resolve().parents[2]
    shown = [m for doc in ("docs/commands.md", "docs/asof.md")
             for m in re.findall(r"find-cause \S+ \[(\d+)/(\d+) (\w+)\]",
                                 (root / doc).read_text(encoding="utf-8"))]
    assert {name for _, _, name in shown} >= {"explain", "culprit", "code", "fixed", "host"}
    for n, m, name in shown:
        assert (int(m), STEPS[int(n) - 1]) == (len(STEPS), name), (n, m, name)
