"""What one run showed, read once (`read_run`), and the within-run verdict the table of
rules gives it (`within_run`): memory (`memory.memory_reading`), step times
(`stepreading.read_steps`), how the run ended (`outcomes.how_it_ended`), its cap
(`facts.capped_at`) or its budget (`facts.cut_short`); `verdict.verdict_of` words the
rule that fired."""

from __future__ import annotations

from harness.analysis.facts import Facts, capped_at, cut_short
from harness.analysis.memory import leaking, memory_reading, risen
from harness.analysis.outcomes import how_it_ended
from harness.analysis.rules import Evidence
from harness.analysis.stepreading import read_steps
from harness.analysis.verdict import CellVerdict, RunReading, verdict_of
from harness.protocol.series import Series
from harness.runtimes.base import RunOutcome
from harness.thresholds import AnalysisConfig


def read_run(series: Series, outcome: RunOutcome, cfg: AnalysisConfig, again: bool = True,
             gpu_unusable: str | None = None, first: bool = False) -> RunReading:
    """Everything the rules read of one run, built once: memory by `memory.
    memory_reading` (the reading the live decider makes on the samples so far), the
    step-time reading (`stepreading.read_steps`), how the run ended
    (`outcomes.how_it_ended`), whether its cap cut its budget short (`facts.capped_at`)
    or its budget ended it after too few calls to tell a leak from a cache, where what
    leaks is under `leak_large_bytes` (`facts.cut_short`)."""
    mem = memory_reading(series, cfg, again)
    st = read_steps(series, cfg, first)
    ended = how_it_ended(series, outcome)
    capped = capped_at(series) if again else None
    leaks = [t for _, t in leaking(mem.memory)]
    short = None
    if again and capped is None and leaks and max(map(risen, leaks)) < cfg.leak_large_bytes:
        short = cut_short(series, cfg.short_calls)
    facts = Facts(ended=ended[0] if ended else None, ended_why=ended[1] if ended else "",
                  gpu_unusable=gpu_unusable, filling=mem.filling, slowdown=st.slowdown,
                  rising=st.rising, busy=st.voided, capped=capped[0] if capped else "",
                  short=short[0] if short else "",
                  budget_calls=capped[1] if capped else short[1] if short else 0)
    notes = (*((mem.cyclic,) if mem.cyclic is not None else ()), *st.notes)
    return RunReading(mem, Evidence(mem.memory, facts), st.steps, st.cpu, st.at_speed,
                      st.busy, st.gpu, ended, notes)


def within_run(series: Series, outcome: RunOutcome, cfg: AnalysisConfig,
               again: bool = True, gpu_unusable: str | None = None,
               first: bool = False) -> CellVerdict:
    """Within-run verdict for one cell: the table of rules (`rules.RULES`) over what the
    run showed (`read_run`), in words. `again`: an ambiguous cell runs again (its
    repeats are not spent), as its reason says; `first`: this is its first attempt, and
    a slowdown it shows is looked at again in a run twice as long (rule `rising`)."""
    return verdict_of(read_run(series, outcome, cfg, again, gpu_unusable, first), series)
