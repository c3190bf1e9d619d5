"""The verdict kinds, each once: its class (good, bad, undecided, unavailable, skipped) and
how every report shows it (`KINDS`). Light, so reports and search need no SciPy.

Renderers read a kind's presentation only from here (`kind(name)`); `Kind`'s fields are
all required and tests/unit/test_every_kind.py runs each kind through every renderer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["ok", "leak", "plateau", "slowdown", "regression", "oom", "timeout", "crash",
                  "not-applicable", "ambiguous", "unavailable", "suspected"]
# good: the code behaves. bad: a finding (exit 1). undecided: it ran but could not tell
# (ambiguous: run longer, exit 4; suspected: a pooled change not confirmed by rounds, by
# the user's choice). unavailable: it could not be prepared and ran nothing (exit 3).
# skipped: the cell does not apply. The first bad may hide in an undecided or unavailable
# cell, never in a skipped one.
Class = Literal["good", "bad", "undecided", "unavailable", "skipped"]
# How junit.xml shows a cell: passing, <failure>, <error> (did not finish or run), <skipped>.
JunitAs = Literal["passed", "failure", "error", "skipped"]
Colour = Literal["red", "green", "yellow", "magenta", "cyan", "grey"]
# The figure a cell of the kind is shown with first: memory growth per call, the step-time
# ratio, the ratio against the baseline, or none.
Figure = Literal["memory", "steps", "baseline", "none"]
# The narrowest table (columns) with room for a verdict.
MIN_WIDTH = 40
# `harness explain`: the agent's --attribute kinds by what a verdict is about.
MEMORY = ("heap", "device")
TIME = ("stack", "ops")
BASELINE = ("stack", "ops", "heap")   # slower or larger than the baseline
UNSURE = ("heap", "device", "stack")  # no sign of which


@dataclass(frozen=True)
class Kind:
    """One verdict kind: its class and its presentation in every report.

    Attributes:
        junit: junit.xml's element for it (a bad kind is never "passed").
        colour, symbol, paint: the terminal's colour, the grid's token, report.html's colour.
        severity: report.html's sort order, worst first.
        verb, title: what the scenario does in `harness compare` ("leaks") and an issue title.
        attribute: what `harness explain` attributes for a cell of this kind.
        figure: the figure the grid's token and the cell's words lead with.
        cut_short: the run ended before its last call: `harness fit` reads it as not fitting.
        compared_with: a row's baseline of this kind is compared with (it ran to its end).
        run_longer: the cell could not tell: the answer is not complete (exit 4).
    """

    name: Verdict
    cls: Class
    junit: JunitAs
    colour: Colour
    symbol: str
    paint: str
    severity: int
    verb: str
    title: str
    attribute: tuple[str, ...]
    figure: Figure = "none"
    cut_short: bool = False
    compared_with: bool = False
    run_longer: bool = False

    @property
    def css(self) -> str:
        """report.html's class for its cells: "good", "bad" or "other"."""
        return self.cls if self.cls in ("good", "bad") else "other"


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("crash", "bad", "error", "red", "X", "#252525", 0, "crashes", "crashes", UNSURE,
         cut_short=True),
    Kind("oom", "bad", "failure", "red", "M", "#7f0000", 1, "runs out of memory",
         "runs out of memory", MEMORY, cut_short=True),
    # killed at its deadline: slow or stuck, the run cannot tell which (never "hangs")
    Kind("timeout", "bad", "error", "red", "T", "#8c510a", 2, "times out",
         "does not finish within its timeout", UNSURE, cut_short=True),
    Kind("leak", "bad", "failure", "red", "L", "#d7301f", 3, "leaks", "leaks memory", MEMORY,
         "memory", compared_with=True),
    Kind("regression", "bad", "failure", "magenta", "R", "#984ea3", 4, "regresses",
         "is slower", BASELINE, "baseline"),
    Kind("slowdown", "bad", "failure", "yellow", "S", "#fc8d59", 5, "slows down",
         "slows down", TIME, "steps", compared_with=True),
    Kind("suspected", "undecided", "skipped", "magenta", "?", "#dd88cc", 6, "may be slower",
         "may be slower", UNSURE, "baseline"),
    Kind("ambiguous", "undecided", "skipped", "grey", "~", "#bdbdbd", 7, "is ambiguous",
         "is ambiguous", UNSURE, run_longer=True),
    Kind("plateau", "good", "passed", "cyan", "P", "#b3e2cd", 8, "plateaus", "plateaus", MEMORY,
         "memory", compared_with=True),
    Kind("unavailable", "unavailable", "error", "yellow", "U", "#fee08b", 9, "is unavailable",
         "is unavailable", UNSURE),
    Kind("not-applicable", "skipped", "skipped", "grey", "/", "#e0e0e0", 10, "does not apply",
         "does not apply", UNSURE),
    Kind("ok", "good", "passed", "green", "·", "#7fc97f", 11, "is ok", "is ok", UNSURE,
         compared_with=True),
)}


def kind(name: str) -> Kind:
    """The kind of a verdict.

    Raises:
        KeyError: not a verdict kind (a renderer must not guess how to show it).
    """
    return KINDS[name]


def of_class(*classes: Class) -> frozenset[str]:
    return frozenset(k.name for k in KINDS.values() if k.cls in classes)


@dataclass(frozen=True)
class Look:
    """How a report shows a cell's verdict: a kind's, or a pseudo-verdict's.

    Attributes:
        severity: report.html's sort order, worst first (pseudo-verdicts after kinds).
        css: report.html's class for its cells ("good", "bad" or "other").
    """

    symbol: str
    colour: Colour
    paint: str
    word: str
    severity: int
    css: str


UNAVAILABLE = "unavailable"
CRASH = "crash"     # the scenario raised: its traceback's last frames are shown
# A crash's reason where the process exited 0 with no end record (e.g. `os._exit`); here,
# not in `outcomes`, so search reads it without NumPy.
SELF_EXIT = "the process ended itself, by os._exit in the scenario or in a library it calls"
OOM = "oom"         # out of memory: the allocation report is looked for
SLOWDOWN = "slowdown"   # steps slowed within the run: said beside a leak too (`also_slowed`)
BAD: frozenset[str] = of_class("bad")
GOOD: frozenset[str] = of_class("good")
UNDECIDED: frozenset[str] = frozenset(k.name for k in KINDS.values() if k.run_longer)
# Ran, and the answer is in doubt: the console says these in full words below a grid.
IN_DOUBT: frozenset[str] = of_class("undecided")
CUT_SHORT: frozenset[str] = frozenset(k.name for k in KINDS.values() if k.cut_short)
COMPARED_WITH: frozenset[str] = frozenset(k.name for k in KINDS.values() if k.compared_with)
# Bad kinds about time: only beside them does a timing ratio belong in an issue draft.
TIMED: frozenset[str] = frozenset(
    k.name for k in KINDS.values() if k.cls == "bad" and k.figure in ("steps", "baseline"))
# Pseudo-verdicts of a report, for cells the matrix has and the directory lacks.
NOT_RUN = "not run"
UNREADABLE = "unreadable"
STALE = "stale"     # made from inputs that changed since (`store.gate`): not a finding
# Every verdict a report shows, kinds first (worst first), then the pseudo-verdicts.
LOOKS: dict[str, Look] = {
    **{k.name: Look(k.symbol, k.colour, k.paint, k.name.replace("-", " "), k.severity, k.css)
       for k in sorted(KINDS.values(), key=lambda k: k.severity)},
    NOT_RUN: Look("-", "grey", "#ffffff", NOT_RUN, len(KINDS), "other"),
    UNREADABLE: Look("!", "grey", "#f0f0f0", UNREADABLE, len(KINDS) + 1, "other"),
    STALE: Look("^", "grey", "#f6f1e4", STALE, len(KINDS) + 2, "other"),
}
# Whether the image is good or bad is not known there: the first bad may be hiding.
UNKNOWN: frozenset[str] = of_class("undecided", "unavailable") | {NOT_RUN, UNREADABLE,
                                                                   STALE}
# Cells that measured nothing of the code: they could not, or need not, run.
NOT_MEASURED: frozenset[str] = of_class("unavailable", "skipped")
# A crash or hang where another run leaked or slowed hides that fault: a culprit probe of
# this kind is untestable, not bad.
BROKE: frozenset[str] = frozenset({"crash", "timeout"})
RUN_LONGER: frozenset[str] = frozenset(k.name for k in KINDS.values() if k.run_longer)
# Memory trend kinds of a source that grew (`MemoryTrend.kind`).
GREW: frozenset[str] = frozenset({"leak", "plateau"})
