"""The checks of a run's settings across keys, once a scenario's settings are read
(`entries.parse_settings`, `entries.parse_scenario`): `iterations` beside early stop,
which never reads it, and a timeout within the run's time budget."""

from __future__ import annotations

from typing import Any, Protocol

from harness.errors import SpecError
from harness.matrixfile.model import RunSettings
from harness.matrixfile.yamlsrc import Located, PathKey


class Reading(Protocol):
    """The matrix being read (`entries.Ctx`): where an error is said."""

    doc: Located
    check_files: bool      # False: a results directory's copy, which ran as it was

    def fail(self, path: PathKey, problem: str, fix: str = "") -> SpecError: ...


def fixed_beside_early_stop(ctx: Reading, raw: dict[str, Any], path: PathKey,
                            base: RunSettings) -> None:
    """`iterations` where `budget` or `max_iterations` is set: early stop runs for its
    budget or up to max_iterations calls and would never read it.

    Raises:
        SpecError: naming the `iterations` key.
    """
    given = [k for k in raw if k.replace("-", "_") == "iterations"]
    if not given or not ctx.check_files:    # a results directory's copy ran as it was
        return
    here = (*path, given[0])
    for key, runs, keep, mode, move in _EARLY_STOP_KEYS:
        if any(k.replace("-", "_") == key for k in raw):
            raise ctx.fail(here, f"iterations beside {key}: {runs} and never reads "
                           "iterations", f"keep one: {keep}, or iterations for a fixed length")
        if (set_above := getattr(base, key)) is not None:
            shown = f"{set_above:g}s" if key == "budget" else str(set_above)
            raise ctx.fail(here, f"iterations under {mode} set above ({key}: {shown} in "
                           "defaults), which never reads it", move)


# The settings that make a run early stop's, each: what it runs, which to keep, how the
# mode is called, and where to move it (a budget is looked at first: with one set in
# `defaults`, max_iterations is its cap)
_EARLY_STOP_KEYS = (
    ("budget", "a budget runs for its seconds (max_iterations the cap)",
     "budget for a run of so many seconds", "a time budget",
     "set budget here instead, or move budget out of defaults"),
    ("max_iterations", "early stop (max_iterations) runs up to max_iterations calls",
     "max_iterations for early stop", "an early stop",
     "set max_iterations here instead, or move max_iterations out of defaults into the "
     "scenarios that stop early"),
)


def timeout_past_budget(ctx: Reading, overrides: dict[str, Any], path: PathKey,
                        settings: RunSettings) -> None:
    """A timeout no longer than the run's time budget (issue 79 item 6: `timeout: 1ms`
    alone, under the default budget): the measured phase alone runs up to its budget,
    the start, setup and warm-up come on top, so every cell would be killed at its
    deadline. A fixed number of calls has no time to compare it with.

    Raises:
        SpecError: at the timeout where it is written (else at the budget), with both.
    """
    budget = settings.run_budget
    if budget is None or settings.timeout > budget or not ctx.check_files:
        return
    keys = ("timeout", "budget")
    here = next(((*where, key) for key in keys for where, raw in (
        (path, overrides), (("defaults",), ctx.doc.data.get("defaults"))) if
        isinstance(raw, dict) and key in raw), ("defaults",))
    said = "set" if settings.budget is not None else "the default"
    raise ctx.fail(here, f"timeout {settings.timeout:g}s is within the run's time budget "
                   f"({budget:g}s, {said}): the budget's calls alone run that long, its "
                   "start, setup and warm-up on top, so every cell would be killed at its "
                   "deadline", f"raise timeout: well above the budget (e.g. timeout: "
                   f"{max(20 * 60, 4 * budget):g}s), or lower budget:")
