"""`Facts`: what the verdict rules read beside the memory trends, stored in result.json so
`--why` can read the rules again; and the facts a run's records say: how its budget went
(`capped_at`, `budget_ended`), the safety stop (`memory_stopped`), and the device its
framework ran on (`device_kind`; an unknown name is never taken for a CPU fallback).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from harness.analysis.records import Record

if TYPE_CHECKING:
    from harness.protocol.series import Series


# How a run can end before its last call, as the rules name it.
ENDINGS = ("oom", "timeout", "crash", "not-applicable")


@dataclass(frozen=True, slots=True)
class Facts(Record):
    """What the rules read beside the memory trends, in words with figures ("" or None: not so);
    built once per cell (`decision.decide`), stored in result.json.

    Attributes:
        unavailable: why the image or engine could not be had.
        runaway: the safety stop ended the run: what grew, past what, at which call.
        precheck, gpu_check: why the GPU precheck found the GPU unusable; all it found.
        ended: how the run ended before its last call (`ENDINGS`), and `ended_why`.
        crowded: killed at its deadline while the host took most of its time.
        gpu_unusable: what the run's log showed of an image that cannot use the GPU.
        filling: the memory sources whose growth a bounded fill still fits.
        capped, short: its cap (most budget left) or budget (< `short_calls`) ended it; may rerun.
        budget_calls: the calls the cell's next run makes.
        slowdown, rising: late steps slower than early ones; a first run's, and the calls of the
            twice-as-long run that looks again.
        once, busy: that slowdown was read in this run only (rule `one-run`); contention
            accounts for it, and the step did no more work.
        regression, suspected: worse than the baseline, confirmed; slower pooled, unconfirmed.
        unsettled: rounds ran for a doubt about a slowdown and left it open.
    """

    unavailable: str | None = None
    runaway: str = ""
    precheck: str | None = None
    gpu_check: str = ""
    ended: str | None = None
    ended_why: str = ""
    crowded: str = ""
    gpu_unusable: str | None = None
    filling: tuple[str, ...] = ()
    capped: str = ""
    short: str = ""
    budget_calls: int = 0
    slowdown: str = ""
    rising: int = 0
    once: str = ""
    busy: str = ""
    regression: str = ""
    suspected: str = ""
    unsettled: str = ""


# A run stopped by its cap with under CAP_SHARE of its budget used was cut short; its next
# cap is CAP_MARGIN times what the whole budget holds at its pace.
CAP_SHARE = 0.5
CAP_MARGIN = 1.5


@dataclass(frozen=True, slots=True)
class BudgetRun:
    """How a budgeted run went, as its agent recorded it: the budget (s), the calls capped
    and made, the measured seconds (None: not said), and how it ended."""

    budget: float
    asked: int
    done: int
    took: float | None
    spent: bool
    stopped_early: bool


def budget_run(series: Series) -> BudgetRun | None:
    """The run's budget record, or None where the agent did not say it or made no call."""
    config = (series.header or {}).get("config") or {}
    end = series.end or {}
    budget, asked, done = config.get("budget"), config.get("iterations"), end.get("iterations")
    took = (end.get("phases") or {}).get("measure")
    if not isinstance(budget, (int, float)) or budget <= 0 or not isinstance(done, int) \
            or done <= 0 or not isinstance(asked, int):
        return None
    return BudgetRun(float(budget), asked, done,
                     float(took) if isinstance(took, (int, float)) else None,
                     bool(end.get("budget_spent")), bool(end.get("stopped_early")))


def capped_at(series: Series) -> tuple[str, int] | None:
    """The run stopped at its cap with most of its budget left: what it ran, in words, and
    the calls the whole budget holds. The budget, not the cap, is a run's length: the
    rest might show the growth level off. None: not so, or no budget said."""
    run = budget_run(series)
    if run is None or run.done != run.asked or run.spent or run.stopped_early \
            or run.took is None or not 0 < run.took < CAP_SHARE * run.budget:
        return None
    calls = math.ceil(CAP_MARGIN * run.done * run.budget / run.took)
    return f"{run.done:,} calls, its cap, in {run.took:.2g} s of its {run.budget:g} s budget", calls


def budget_ended(series: Series) -> tuple[str, int, int] | None:
    """The run's budget ended it: what it made, in words, the calls made and its cap
    (whether too few is rule `length-short`). None: not so, or no budget said."""
    run = budget_run(series)
    if run is None or not run.spent or run.stopped_early:
        return None
    pace = f", {1e3 * run.took / run.done:.3g} ms a call" if run.took is not None else ""
    return f"{run.done:,} calls in its {run.budget:g} s budget{pace}", run.done, run.asked


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def memory_stopped(series: Series) -> str:
    """The agent's safety stop in words (the end record's `memory_stop`), "" if none."""
    stop = (series.end or {}).get("memory_stop")
    if not isinstance(stop, dict):
        return ""
    grew, limit = stop.get("grew"), stop.get("limit")
    if not isinstance(grew, int | float) or not isinstance(limit, int | float):
        return ""
    if stop.get("killed") and stop.get("phase") == "setup":
        return (f"the safety stop killed the run in its setup or first call, while its "
                f"memory grew {_mib(grew)}, past half the memory free at its start "
                f"({_mib(limit)})")
    if stop.get("killed"):
        calls = [int(s["i"]) for s in series.samples if isinstance(s.get("i"), int)]
        at = f"call {max(calls) + 1:,}" if calls else "a call"
        return (f"the safety stop killed the run in {at}, which did not return while its "
                f"memory grew {_mib(grew)}, past twice the limit of "
                f"{_mib(limit)}")
    phase = stop.get("phase")
    call = stop.get("call")
    at = f"call {call:,}" if isinstance(call, int) else "a call"
    return (f"the safety stop ended the run at {at}"
            + (f" ({'warm-up' if phase == 'warmup' else 'measured phase'})" if phase else "")
            + f": memory grew {_mib(grew)} after the first call, past the limit of "
            f"{_mib(limit)}")


DeviceKind = Literal["gpu", "cpu", "unknown"]

# Checked in order on the lower-cased name; the first pattern that matches decides.
_NAMES: tuple[tuple[DeviceKind, re.Pattern[str]], ...] = (
    # ONNX Runtime execution providers (a list of them is reported as one string).
    ("gpu", re.compile(r"(cuda|tensorrt|rocm|migraphx|dml)executionprovider")),
    ("cpu", re.compile(r"^\W*cpuexecutionprovider\W*$")),
    # TensorFlow: /device:GPU:0, /job:localhost/replica:0/task:0/device:GPU:0, GPU:0.
    ("gpu", re.compile(r"(^|[/:])gpu(:\d+)?\b|^gpu\b")),
    # PyTorch, CuPy, JAX (cuda, gpu, rocm), Apple's mps, XLA's TPU.
    ("gpu", re.compile(r"\bcuda|cudadevice|<cuda device|\brocm|\bmps\b|\btpu")),
    # CPU names, as each framework spells them.
    ("cpu", re.compile(r"\bcpu\b|[/:_]cpu|cpudevice|^cpu")),
)


def device_kind(name: str) -> DeviceKind:
    """"gpu", "cpu" or "unknown" for a device name as a framework reports it.

    Example:
        >>> [device_kind(n) for n in ("cuda:0", "/device:CPU:0", "CUDAExecutionProvider")]
        ['gpu', 'cpu', 'gpu']
    """
    text = name.strip().lower()
    for kind, pattern in _NAMES:
        if pattern.search(text):
            return kind
    return "unknown"
