"""The one table of GPU log signs (`harness.gpu.LOG_SIGNS`) and its two readings."""

from __future__ import annotations

import re

from harness.analysis.decision import within_run
from harness.analysis.outcomes import runtime_incompatibility
from harness.gpu import LOG_SIGNS, NOT_APPLICABLE_TEXT
from harness.protocol.ingest import Series
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig


def test_every_sign_is_read_one_way_at_least_and_not_applicable_ones_come_first() -> None:
    kinds = [sign.kind for sign in LOG_SIGNS]
    assert kinds == sorted(kinds, key=lambda k: k != "not-applicable")
    for sign in LOG_SIGNS:
        assert sign.after_run or sign.in_run, sign
        assert not sign.in_run or sign.kind == "not-applicable", sign
        re.compile(sign.pattern)


def test_a_sign_read_both_ways_is_found_by_both_by_its_one_pattern() -> None:
    # GIVEN each literal text a sign read both ways stands for (issue 41: "no kernel
    # image" was two regexes, one reading finding `cudaErrorNoKernelImageForDevice`
    # and the other not)
    both = [sign for sign in LOG_SIGNS if sign.after_run and sign.in_run]
    assert both
    for sign in both:
        for text in sign.pattern.split("|"):
            log = f"RuntimeError: CUDA error: {text}\n"
            # THEN the run ends not-applicable within the run, on the text found, and
            # the after-run reading gives the sign's meaning
            found = NOT_APPLICABLE_TEXT.search(log)
            assert found is not None and found.group(0) == text, (sign, text)
            assert runtime_incompatibility(None, None, log) == (sign.kind, sign.why), text
            ended = within_run(Series(), RunOutcome(exit_code=1, log_tail=log),
                               AnalysisConfig())
            assert (ended.verdict, ended.reason) == ("not-applicable", text)


def test_a_sign_read_one_way_is_not_read_the_other() -> None:
    ptxas = "ptxas fatal: Value 'sm_89' is not defined for option 'gpu-name'"
    assert NOT_APPLICABLE_TEXT.search(ptxas) is None
    assert runtime_incompatibility(None, None, ptxas) == (
        "not-applicable", "the image's ptxas does not know this GPU")
    display = "system has unsupported display driver / cuda driver combination"
    assert NOT_APPLICABLE_TEXT.search(display) is not None
    assert runtime_incompatibility(None, None, display) is None
