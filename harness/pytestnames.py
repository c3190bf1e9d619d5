"""The pytest plugin's names, which the plugin (`harness/pytest_plugin.py`, loaded in
every pytest session) and a marked test's run (`harness.api.marked`, loaded once one
runs) share: the markers, the report's keys, the saved runs' folder and the session's
allowance for running undecided tests on (`RunOn`). Below both, and importing nothing
of harness, so the plugin loads no more of harness than this."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

LEAKS, TIME = "harness_leaks", "harness_time"
PROPERTY = "harness"        # the user_properties key (junit-xml), the report section
SAVED_DIR = ".harness"      # saved runs (--harness-save), under the rootdir
RAN_ON = "harness_ran_on"   # user_properties: "decided|undecided SECONDS" of a test run on
TOOK = "harness_took"       # user_properties: "WALL OWN" seconds of its calls (a busy host)
OVERRUN, ALLOWANCE = 16, "5m"   # --harness-overrun, --harness-allowance: their defaults


@dataclass
class RunOn:
    """How far the session's undecided tests may run on (`--harness-overrun`,
    `--harness-allowance`) and what they have spent of it."""

    overrun: int            # budgets a test takes in all, its runs again included
    allowance: float        # seconds past their first runs, the session's tests together
    spent: float = 0.0

    def overrun_for(self, budget: float) -> int | None:
        """The `overrun` a test of `budget` seconds runs under: the session's, less what
        would pass the allowance left; None once that leaves no more than the check's
        own 4 budgets."""
        left = self.allowance - self.spent
        most = min(self.overrun, int(1.0 + left / budget)) if budget > 0 else self.overrun
        return most if most > 4 else None


RUNNING_ON = pytest.StashKey[RunOn]()


def duration_seconds(text: str) -> float | None:
    """"5m", "90s", "500ms", "1h" or a number of seconds; None where it is none."""
    units = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))
    for unit, scale in units:
        if text.endswith(unit) and not (unit == "s" and text.endswith("ms")):
            text, factor = text[: -len(unit)], scale
            break
    else:
        factor = 1.0
    try:
        value = float(text) * factor
    except ValueError:
        return None
    return value if value >= 0 and math.isfinite(value) else None
