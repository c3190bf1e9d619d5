"""The rules of the one memory decision, in order: one table, named, pure.

`memory.reading_of` builds an `Evidence` once per cell (every source's trend from its
samples, decoded once, and the fill checks) and asks each rule of `RULES` in turn; the
first that fires decides, and its id is kept in the result (`CellResult.rule`).
`harness report DIR --why CELL` prints every rule in order with its figures and why
it fired or not (`why`); docs/verdicts.md's list of rules is `rules_markdown()`, and
`tests/unit/analysis/test_rules.py` fails when the two differ.

Per source, a trend (`growth.trend_and_fill`) is `leak` by the per-call rule (slope
interval wholly above `live_floor_bytes`, growth past `live_min_growth_bytes`, the late
third keeping `live_decay_ratio` of the rate) or by the total-floor rule (interval above
zero, growth over the source's floor, the late slope's lower bound kept up over the span
still over it), unless `fill.fill_check` finds a bounded fill that fits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from harness.analysis.fill import Fill
from harness.analysis.growth import steady_above_trend
from harness.analysis.trends import MemoryTrend
from harness.thresholds import AnalysisConfig

# Memory that may carry a leak, and the trend sources each needs leaking: RSS only
# with USS agreeing (file-backed pages and page cache move RSS, not USS).
CARRIERS: dict[str, tuple[str, ...]] = {
    "heap": ("heap",), "uss+rss": ("uss", "rss"), "gpu": ("gpu",), "fw": ("fw",)}
# The sources read first, in order, when nothing leaks: the cell's memory in words.
PRIMARY = ("heap", "uss", "rss")
PLATEAUS = ("heap", "uss", "rss", "gpu", "fw")
# Sources read by the total floor alone, never the per-call rule: page cache, file-backed
# and lazily touched pages move RSS (and the cgroup) by pages, with no leak behind them.
TOTAL_ONLY = frozenset({"rss", "cgroup"})


@dataclass(frozen=True)
class Evidence:
    """What the rules read, built once per cell: every source's trend and the fill
    checks that turned a leak ambiguous, by source."""

    memory: Mapping[str, MemoryTrend]
    fills: Mapping[str, Fill]

    @property
    def primary(self) -> str | None:
        return next((k for k in PRIMARY if k in self.memory), None)


@dataclass(frozen=True)
class Rule:
    """One rule: its id (kept in the result), what it decides, when, the thresholds it
    reads (names of `AnalysisConfig`), and its test: the carrier it names when it
    fires, else None."""

    id: str
    says: str
    when: str
    thresholds: tuple[str, ...]
    test: Callable[[Evidence], str | None]


def leaking_carriers(ev: Evidence) -> list[str]:
    """The carriers whose every source leaks, the largest growth per call first."""
    found = [name for name, parts in CARRIERS.items()
             if all(p in ev.memory and ev.memory[p].kind == "leak" for p in parts)]
    return sorted(found, key=lambda n: -ev.memory[CARRIERS[n][0]].slope)


def filling_carrier(ev: Evidence) -> str | None:
    """The carrier whose leak a filling cache could still explain, largest rate first.
    USS with RSS counts where one of the two could be a fill and the other leaks or
    could be one."""
    found: list[tuple[float, str]] = []
    for name, parts in CARRIERS.items():
        if not all(p in ev.memory and (p in ev.fills or ev.memory[p].kind == "leak")
                   for p in parts):
            continue
        filling = [p for p in parts if p in ev.fills]
        if filling:
            found.append((ev.memory[filling[0]].slope, name))
    return max(found)[1] if found else None


def _leak(ev: Evidence) -> str | None:
    found = leaking_carriers(ev)
    return found[0] if found else None


def _insufficient(ev: Evidence) -> str | None:
    p = ev.primary
    return "none" if p is None else p if ev.memory[p].kind == "insufficient" else None


def _unsure(ev: Evidence) -> str | None:
    p = ev.primary
    return p if p is not None and ev.memory[p].kind == "ambiguous" else None


def _unconfirmed(ev: Evidence) -> str | None:
    rss, uss = ev.memory.get("rss"), ev.memory.get("uss")
    return "rss" if rss is not None and rss.kind == "leak" and (
        uss is None or uss.kind != "stable") else None


def _plateau(ev: Evidence) -> str | None:
    return next((k for k in PLATEAUS if k in ev.memory and ev.memory[k].kind == "plateau"),
                None)


def _ok(ev: Evidence) -> str | None:
    return ev.primary or "none"


LEAK_THRESHOLDS = ("live_floor_bytes", "live_min_growth_bytes", "live_decay_ratio",
                   "leak_floor_bytes", "heap_floor_bytes", "fill_share", "fill_bytes")
RULES: tuple[Rule, ...] = (
    Rule("leak", "leak", "every source of a carrier (heap; USS with RSS; GPU; framework "
         "allocator) is `leak`: by the per-call rule (not RSS's: pages move it) or the "
         "total-floor rule, and no bounded fill fits its growth", LEAK_THRESHOLDS, _leak),
    Rule("filling", "ambiguous", "a carrier's growth passes a leak rule, but a saturating "
         "fill no larger than `fill_share` of its level (at most `fill_bytes`) fits it: a "
         "leak or a cache still filling; the cell runs again 4x longer",
         ("fill_share", "fill_bytes"), filling_carrier),
    Rule("insufficient", "ambiguous", "the first of heap, USS, RSS read has fewer than "
         "`min_samples` readings (5 for the GPU and the framework allocator)",
         ("min_samples",), _insufficient),
    Rule("unsure", "ambiguous", "that source neither clearly grows nor is stable (its "
         "late window too noisy to tell growing from stopped)",
         ("confidence", "late_confidence"), _unsure),
    Rule("unconfirmed", "ambiguous", "RSS leaks and USS is not stable: page cache and "
         "file-backed pages move RSS alone", (), _unconfirmed),
    Rule("plateau", "plateau", "a source grew past its floor, then its late slope's upper "
         "bound fell under `stall_fraction` of the rate or would not pass the floor",
         ("stall_fraction", "leak_floor_bytes", "heap_floor_bytes"), _plateau),
    Rule("ok", "ok", "none of the above: memory stable, with the smallest steady leak the "
         "run could have missed said (\"no leak above 40 B/call in 1,000 calls\")",
         ("live_floor_bytes",), _ok),
)
RULE_IDS = tuple(r.id for r in RULES)


def first_rule(ev: Evidence) -> tuple[Rule, str]:
    """The first rule that fires and the source or carrier it names."""
    for rule in RULES:
        named = rule.test(ev)
        if named is not None:
            return rule, named
    raise AssertionError("the last rule always fires")


def figures(t: MemoryTrend, cfg: AnalysisConfig) -> str:
    """A source's figures, as --why prints them, with whether the per-call rule holds."""
    if t.kind == "insufficient":
        return f"{t.source}: {t.n} readings, too few"
    per_call = ("not applied (pages move it)" if t.source in TOTAL_ONLY
                else "holds" if steady_above_trend(t, cfg) else "does not hold")
    return (f"{t.source}: {t.kind}, {t.slope:+,.0f} B/call (CI {t.slope_lo:+,.0f}.."
            f"{t.slope_hi:+,.0f}), late {t.late_slope:+,.0f} (CI {t.late_lo:+,.0f}.."
            f"{t.late_hi:+,.0f}), grew {t.end - t.start:+,.0f} B, floor {t.floor:,.0f} B, "
            f"{t.n} readings; per-call rule (CI above {cfg.live_floor_bytes:,.0f} B/call, "
            f"late >= {cfg.live_decay_ratio:g} x rate) {per_call}")


def why(ev: Evidence, cfg: AnalysisConfig) -> list[str]:
    """Every rule in order, with whether it fired (the first that fired decided), and
    each source's figures first."""
    out = [f"  {figures(t, cfg)}" for t in ev.memory.values()]
    decided = False
    for k, rule in enumerate(RULES, 1):
        named = rule.test(ev)
        if named is not None and not decided:
            state, decided = f"fired ({named}): decides {rule.says}", True
        elif rule is RULES[-1]:
            # The last rule is "none of the above": after a decision it is never reached.
            state = "not reached: an earlier rule decided"
        elif named is not None:
            state = f"would fire ({named}), but an earlier rule decided"
        else:
            state = "did not fire"
        out.append(f"{k}. {rule.id}: {state}; when {rule.when}")
    return out


def _num(value: object) -> str:
    if isinstance(value, int | float) and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def rules_markdown(defaults: Mapping[str, object]) -> str:
    """The table of rules for docs/verdicts.md, with the thresholds' defaults."""
    lines = ["| # | rule | decides | when | thresholds (default) |", "|---|---|---|---|---|"]
    for k, rule in enumerate(RULES, 1):
        said = ", ".join(f"`{t}` ({_num(defaults[t])})" for t in rule.thresholds) or "-"
        lines.append(f"| {k} | `{rule.id}` | {rule.says} | {rule.when} | {said} |")
    return "\n".join(lines) + "\n"


DOC_BEGIN = "<!-- the rules: made by harness.analysis.rules.rules_markdown; do not edit -->"
DOC_END = "<!-- end of the rules -->"


def doc_with_rules(text: str, defaults: Mapping[str, object]) -> str:
    """docs/verdicts.md's text with its generated table of rules made anew (between
    `DOC_BEGIN` and `DOC_END`)."""
    head, _, rest = text.partition(DOC_BEGIN)
    _, _, tail = rest.partition(DOC_END)
    return f"{head}{DOC_BEGIN}\n{rules_markdown(defaults)}{DOC_END}{tail}"


if __name__ == "__main__":     # python -m harness.analysis.rules docs/verdicts.md
    import dataclasses
    import sys
    from pathlib import Path

    path = Path(sys.argv[1])
    made = doc_with_rules(path.read_text(), {
        f.name: getattr(AnalysisConfig(), f.name) for f in dataclasses.fields(AnalysisConfig)})
    path.write_text(made)
