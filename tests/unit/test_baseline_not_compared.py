"""Issue 87 item 6: a row's baseline that cannot run is said. Where the first image
crashes (an API its old release lacks) or cannot be had, the later cells read "not
compared: the baseline <image> crashed" (or "was unavailable") in their words, in
result.json and the report, with the fix, and the sweep's progress says it; before,
"...; vs baseline: pending" and nothing after."""

from __future__ import annotations

from pathlib import Path

import sweepkit
from fakeruntime import Behaviour


def test_a_crashed_baseline_leaves_the_row_said_as_not_compared(tmp_path: Path) -> None:
    # GIVEN three images whose first crashes
    got = sweepkit.swept(tmp_path, ["old", "mid", "new"],
                         {"old": Behaviour(error="AttributeError: no attribute 'rfft'")},
                         plan=True, report=True)
    results = {r.image.label: r for r in got.results.values()}
    assert results["old"].verdict == "crash"
    # THEN each later cell says it was not compared, with what, why and the fix
    for label in ("mid", "new"):
        res = results[label]
        assert res.vs_baseline is None, res
        assert "not compared: the baseline old crashed" in res.reason, res.reason
        assert "`baseline: <image>` in the matrix" in res.reason, res.reason
        assert any(f"{res.id}: not compared: the baseline old crashed" in line
                   for line in got.said), got.said
    # AND report.md and result.json say it where the reason stands
    md = (got.root / "report.md").read_text()
    assert md.count("not compared: the baseline old crashed") >= 2, md
    assert "not compared: the baseline old crashed" in (got.root / "results.json").read_text()
