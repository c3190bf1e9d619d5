"""docs/verdicts.md's tables of rules, made from the tables themselves (`rules.RULES`,
`runrules`, `trendrules`, `steprules`, `baselinerules`) with the thresholds' defaults:
`python -m harness.analysis.ruledocs docs/verdicts.md`; a test fails when the page and
the tables differ."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.analysis.baselinerules import (
    CONFIRM_RULES,
    DOUBT_RULES,
    PEAK_RULES,
    PEAK_VERDICT_RULES,
    POOLED_RULES,
    SETTLED_RULES,
    UNSETTLED_RULES,
)
from harness.analysis.rules import RULES
from harness.analysis.runrules import LENGTH_RULES, LIVE_RULES, RERUN_RULES, ROUND_RULES
from harness.analysis.steprules import LOAD_RULES, STEP_RULES
from harness.analysis.table import Rule
from harness.analysis.trendrules import GARBAGE_RULES, TREND_RULES
from harness.thresholds import AnalysisConfig

# The marks docs/verdicts.md puts around each table (`doc_with_rules` fills them).
DOC_TABLES: tuple[tuple[str, str, tuple[Rule[Any], ...], str], ...] = (
    ("<!-- the live look's rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the live look's rules -->", LIVE_RULES, "the run"),
    ("<!-- the rounds' rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the rounds' rules -->", ROUND_RULES, "the round"),
    ("<!-- the re-runs' rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the re-runs' rules -->", RERUN_RULES, "the cell"),
    ("<!-- the memory kinds' rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the memory kinds' rules -->", TREND_RULES, "the source's kind"),
    ("<!-- the collection's rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the collection's rules -->", GARBAGE_RULES, "the heap"),
    ("<!-- the length's rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the length's rules -->", LENGTH_RULES, "the reading"),
    ("<!-- the step times' rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the step times' rules -->", STEP_RULES, "the steps"),
    ("<!-- the load's rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the load's rules -->", LOAD_RULES, "the slowdown"),
    ("<!-- the pooled steps' rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the pooled steps' rules -->", POOLED_RULES, "the steps"),
    ("<!-- the peak's rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the peak's rules -->", PEAK_RULES, "the peak"),
    ("<!-- the peak verdict's rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the peak verdict's rules -->", PEAK_VERDICT_RULES, "the peak"),
    ("<!-- the doubt's rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the doubt's rules -->", DOUBT_RULES, "the comparison"),
    ("<!-- the settled rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the settled rules -->", SETTLED_RULES, "the rounds"),
    ("<!-- the confirmation's rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the confirmation's rules -->", CONFIRM_RULES, "the rounds say"),
    ("<!-- the unsettled rules: made by harness.analysis.ruledocs; do not edit -->",
     "<!-- end of the unsettled rules -->", UNSETTLED_RULES, "the doubt"),
)


def _num(value: object) -> str:
    if isinstance(value, int | float) and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def rules_markdown(defaults: Mapping[str, object],
                   rules: Sequence[Rule[Any]] = RULES, says: str = "decides") -> str:
    """A table of rules for docs/verdicts.md (the verdict's by default; `runrules`'s
    too), with the thresholds' defaults; `says`: the head of what a rule does."""
    lines = [f"| # | rule | {says} | when | thresholds (default) |", "|---|---|---|---|---|"]
    for k, rule in enumerate(rules, 1):
        said = ", ".join(f"`{t}` ({_num(defaults[t])})" for t in rule.thresholds) or "-"
        mark = " (memory)" if rule.memory else ""
        lines.append(f"| {k} | `{rule.id}`{mark} | {rule.says} | {rule.when} | {said} |")
    return "\n".join(lines) + "\n"


DOC_BEGIN = "<!-- the rules: made by harness.analysis.ruledocs.rules_markdown; do not edit -->"
DOC_END = "<!-- end of the rules -->"


def _with_table(text: str, begin: str, end: str, table: str) -> str:
    head, found, rest = text.partition(begin)
    if not found:
        return text
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{table}{end}{tail}"


def doc_with_rules(text: str, defaults: Mapping[str, object]) -> str:
    """docs/verdicts.md's text with its generated tables of rules made anew (between
    `DOC_BEGIN` and `DOC_END`; the tables of a run's course between their own marks,
    `ruledocs.DOC_TABLES`)."""
    out = _with_table(text, DOC_BEGIN, DOC_END, rules_markdown(defaults))
    for begin, end, table, says in DOC_TABLES:
        out = _with_table(out, begin, end, rules_markdown(defaults, table, says))
    return out


if __name__ == "__main__":     # python -m harness.analysis.ruledocs docs/verdicts.md
    import dataclasses
    import sys
    from pathlib import Path

    path = Path(sys.argv[1])
    made = doc_with_rules(path.read_text(), {
        f.name: getattr(AnalysisConfig(), f.name) for f in dataclasses.fields(AnalysisConfig)})
    path.write_text(made)
