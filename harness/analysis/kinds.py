"""Verdict names and which are good or bad: light, so reports and search need no SciPy."""

from __future__ import annotations

from typing import Literal

Verdict = Literal["ok", "leak", "plateau", "slowdown", "regression", "oom", "timeout", "crash",
                  "not-applicable", "ambiguous", "unavailable", "suspected"]
VERDICTS: tuple[str, ...] = ("ok", "leak", "plateau", "slowdown", "regression", "oom", "timeout",
                             "crash", "not-applicable", "ambiguous", "unavailable", "suspected")
# `unavailable`: the cell could not be prepared (image not found, pip pin that does not
# install); it ran nothing, so it is neither good nor bad and the sweep goes on.
UNAVAILABLE = "unavailable"
BAD: frozenset[str] = frozenset({"leak", "slowdown", "regression", "oom", "timeout", "crash"})
GOOD: frozenset[str] = frozenset({"ok", "plateau"})
# "suspected": slower than the baseline on pooled steps, not confirmed by interleaved
# rounds (`rounds: 0`); neither good nor bad, so bisect and first-bad skip it.
# Not decided: the cell ran but its series could not tell (run longer). Not clean.
UNDECIDED: frozenset[str] = frozenset({"ambiguous"})
# Pseudo-verdicts of a report, for cells the matrix has and the directory lacks.
NOT_RUN = "not run"
UNREADABLE = "unreadable"
