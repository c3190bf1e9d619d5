"""The one table of GPU log signs (`harness.gpu.LOG_SIGNS`) and its two readings."""

from __future__ import annotations

import re

from harness.analysis.verdict import within_run
from harness.gpu import LOG_SIGNS, NOT_APPLICABLE_TEXT, runtime_incompatibility
from harness.protocol.ingest import Series
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig


def test_every_sign_is_read_one_way_at_least_and_not_applicable_ones_come_first() -> None:
    kinds = [sign.kind for sign in LOG_SIGNS]
    assert kinds == sorted(kinds, key=lambda k: k != "not-applicable")
    for sign in LOG_SIGNS:
        assert sign.after_run or sign.in_run, sign
        assert sign.in_run is None or sign.kind == "not-applicable", sign


def test_a_sign_read_both_ways_is_found_by_both_in_the_full_text() -> None:
    # GIVEN each sign's full text as the after-run reading knows it (literal patterns)
    for sign in LOG_SIGNS:
        if sign.after_run is None or sign.in_run is None:
            continue
        log = f"RuntimeError: CUDA error: {sign.after_run}\n"
        # THEN the run ends not-applicable within the run, on the text found, and the
        # after-run reading gives the sign's meaning
        found = NOT_APPLICABLE_TEXT.search(log)
        assert found is not None and re.fullmatch(sign.in_run, found.group(0), re.I)
        assert runtime_incompatibility(None, None, log) == (sign.kind, sign.why)
        ended = within_run(Series(), RunOutcome(exit_code=1, log_tail=log), AnalysisConfig())
        assert (ended.verdict, ended.reason) == ("not-applicable", found.group(0))


def test_a_sign_read_one_way_is_not_read_the_other() -> None:
    ptxas = "ptxas fatal: Value 'sm_89' is not defined for option 'gpu-name'"
    assert NOT_APPLICABLE_TEXT.search(ptxas) is None
    assert runtime_incompatibility(None, None, ptxas) == (
        "not-applicable", "the image's ptxas does not know this GPU")
    display = "system has unsupported display driver / cuda driver combination"
    assert NOT_APPLICABLE_TEXT.search(display) is not None
    assert runtime_incompatibility(None, None, display) is None
