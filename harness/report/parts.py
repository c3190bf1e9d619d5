"""Typed views of a stored result's parts that the renderers read (`vs_baseline`).

Built from `result.json` dicts, so results directories written by older code load:
a missing part is None, a missing field its empty value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    """One comparison with the baseline: step times, CPU times or peak RSS."""

    ratio: float
    direction: str | None
    p_value: float | None = None      # peaks carry none

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Change | None:
        if not d:
            return None
        p = d.get("p_value")
        return cls(float(d["ratio"]), d.get("direction"),
                   float(p) if "p_value" in d and p is not None else None)


@dataclass(frozen=True)
class Rounds:
    """The interleaved rounds that confirmed (or not) a step-time change."""

    ratio: float | None
    reason: str
    decided_by: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Rounds | None:
        if not d:
            return None
        ratio = d.get("ratio")
        return cls(float(ratio) if ratio is not None else None, str(d.get("reason", "")),
                   len(d.get("decided_by") or []))


@dataclass(frozen=True)
class VsBaseline:
    """A cell against its row's baseline."""

    baseline: str | None
    steps: Change | None
    cpu: Change | None
    peak_rss: Change | None
    direction: str | None        # the rounds' when they ran, else the pooled steps'
    confirmation: Rounds | None

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> VsBaseline | None:
        vs = result.get("vs_baseline")
        if not vs:
            return None
        steps = Change.from_dict(vs.get("steps"))
        direction = vs.get("direction", steps.direction if steps else None)
        base = vs.get("baseline")
        return cls(str(base) if base is not None else None, steps,
                   Change.from_dict(vs.get("cpu")), Change.from_dict(vs.get("peak_rss")),
                   direction, Rounds.from_dict(vs.get("confirmation")))
