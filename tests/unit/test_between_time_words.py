"""Issue 87 item 8: explain described a regression between two releases in within-run
terms ("11% of late samples ... (early 6%); 0% in 0.8.4"): a step slower in one release
than in the other is not slower late in its run. Between runs, a site's time is its share
of each run's samples, the good release's beside it; within a run (a `slowdown`), its
late share against its early one, as before."""

from __future__ import annotations

from harness.analysis.where import Site, Where, changes


def _run(early: int, late: int) -> Where:
    """A run of 200 stack samples, 100 early and 100 late, `early` and `late` of them in
    parse() at x.py:5, the rest in step() at x.py:9."""
    parse = ("/w/x.py", 5, "parse")
    step = ("/w/x.py", 9, "step")
    return Where(300, ("stack",), stack=(Site((parse,), early=early, late=late),
                                         Site((step,), early=100 - early, late=100 - late)),
                 stack_samples=(100, 100))


def test_a_regression_between_releases_is_said_in_shares_of_each_run() -> None:
    good, bad = _run(0, 0), _run(6, 16)
    found = changes(good, bad, "x.py", between=True)
    assert [c.line("0.8.4", "2.0.0") for c in found][:1] == [
        "time: 11% of samples in x.py:5 parse in 2.0.0; 0% in 0.8.4"], found
    assert found[0].cells() == ("time", "x.py:5 parse", "11% of samples", "0%")
    # within a run, as before: late against early
    within = changes(good, bad, "x.py")
    assert within[0].line("0.8.4", "2.0.0").startswith(
        "time: 16% of late samples in x.py:5 parse in 2.0.0 (early 6%)"), within
