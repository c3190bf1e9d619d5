"""`Facts`: what the verdict rules (`analysis.rules`) read beside the memory trends,
as one light record that result.json stores, so `--why` reads the rules again from it."""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.recordbase import Record

# How a run can end before its last call, as the rules name it.
ENDINGS = ("oom", "timeout", "crash", "not-applicable")


@dataclass(frozen=True, slots=True)
class Facts(Record):
    """What the rules read beside the memory trends, each said with its figures ("" or
    None: not so); built once per cell (`decision.decide`), stored in result.json.

    Attributes:
        unavailable: Why the image or engine could not be had.
        precheck: Why the GPU precheck found the image cannot use the GPU.
        gpu_check: What the GPU precheck found of any kind ("unsupported: ..."), so
            deciding again (`--reanalyze`) starts from it.
        ended: How the run ended before its last call (`ENDINGS`), and `ended_why`.
        gpu_unusable: What the run's log showed of an image that cannot use the GPU.
        filling: The memory sources whose growth a bounded fill still fits.
        slowdown: Late steps slower than early ones: the figures.
        busy: Contention accounts for that slowdown, and the step did no more work.
        regression: Worse than the row's baseline, confirmed: the figures.
        suspected: Slower than the baseline pooled, no rounds to confirm it.
    """

    unavailable: str | None = None
    precheck: str | None = None
    gpu_check: str = ""
    ended: str | None = None
    ended_why: str = ""
    gpu_unusable: str | None = None
    filling: tuple[str, ...] = ()
    slowdown: str = ""
    busy: str = ""
    regression: str = ""
    suspected: str = ""
