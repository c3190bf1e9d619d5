"""The matrix's `fit:` block (and `harness fit --param`) -> `FitSpec`, validated."""

from __future__ import annotations

import dataclasses
import re
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from harness.matrixfile.model import Cell, FitSpec, ScenarioSpec

if TYPE_CHECKING:
    from harness.matrixfile.entries import Ctx

KEYS = ("param", "range")
_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")
_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RANGE_FIX = "write the range as LO..HI with whole numbers, e.g. 1..64"


def parse_range(value: Any) -> tuple[int, int] | None:
    """(lo, hi) from `1..64` or `[1, 64]`; None when it is neither or lo > hi."""
    if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
        lo, hi = value
    elif isinstance(value, str) and (m := _RANGE.match(value)):
        lo, hi = int(m.group(1)), int(m.group(2))
    else:
        return None
    return (lo, hi) if lo <= hi else None


def check_param(param: str, scenarios: tuple[ScenarioSpec, ...]) -> str | None:
    """Why `param` cannot be fitted in these scenarios, or None: a name that is not an
    identifier, or a scenario that sets it to something other than a whole number."""
    if not _PARAM.match(param):
        return f"{param!r} is not a param name"
    for s in scenarios:
        v = s.params.get(param)
        if v is not None and type(v) is not int:
            return (f"scenario {s.id} sets {param} to {v!r}, not a whole number; fit "
                    "varies integer params only")
    return None


def parse_fit(ctx: Ctx, value: Any, scenarios: tuple[ScenarioSpec, ...]) -> FitSpec | None:
    """Validate `fit: {param: batch, range: 1..64}` (None when absent).

    Raises:
        SpecError: an unknown or missing key, a bad range, a param a scenario sets to a
            value that is not a whole number.
    """
    if value is None:
        return None
    raw = ctx.mapping(value, ("fit",), KEYS)
    for key in KEYS:
        if key not in raw:
            raise ctx.fail(("fit",), f"missing key 'fit.{key}'",
                           "write e.g. fit: {param: batch, range: 1..64}")
    param = raw["param"]
    if not isinstance(param, str):
        raise ctx.fail(("fit", "param"), f"param must be a name, got {param!r}",
                       "name the integer scenario param to vary, e.g. param: batch")
    problem = check_param(param, scenarios)
    if problem is not None:
        raise ctx.fail(("fit", "param"), problem,
                       "name an integer scenario param, e.g. param: batch")
    bounds = parse_range(raw["range"])
    if bounds is None:
        raise ctx.fail(("fit", "range"), f"bad range {raw['range']!r}", RANGE_FIX)
    return FitSpec(param, bounds[0], bounds[1])


def probe_cell(cell: Cell, param: str, value: int) -> Cell:
    """The cell with `param` set to `value`, its own id (`<cell id>.<param><value>`), no
    repeat runs (a probe asks whether the value runs, not whether memory grows), and the
    heap as the program leaves it (`heap: stock`): the quiet heap's collections before
    each reading and its thread cache off lower a framework's peaks (TF 2.12's conv net
    fit 13 under it where the plain program fits 11), and a fit answers for the program
    as it runs."""
    params = dict(cell.scenario.params)
    params[param] = value
    settings = dataclasses.replace(cell.settings, repeats=0, heap="stock")
    scenario = dataclasses.replace(cell.scenario, params=MappingProxyType(params),
                                   settings=settings)
    return dataclasses.replace(cell, id=f"{cell.id}.{param}{value}", scenario=scenario)
