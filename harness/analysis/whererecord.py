"""The agent's where record (`--attribute`) in typed form: allocation sites, sampled
stacks and framework op times, parsed leniently (what does not fit is a problem, never
raised). `analysis.where` ranks and matches them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Frame = tuple[str, int, str]               # file, line, function; innermost first
Source = Callable[[str, int], str | None]  # (file's base name, line) -> the line's text
# "workers": the heap's sites in the processes the step drives (the agent's heap kind
# follows forks and spawns: attribution.py), added up over them.
MEMORY_PARTS = ("heap", "workers", "device", "native")


@dataclass(frozen=True)
class Site:
    """One allocation site (bytes and blocks grown over the run) or one sampled stack
    (samples in the early and late windows)."""

    frames: tuple[Frame, ...]
    size: int = 0
    count: int = 0
    early: int = 0
    late: int = 0


@dataclass(frozen=True)
class OpTime:
    """One framework op: mean µs per call in the early and late windows."""

    name: str
    op: str
    early_us: float
    late_us: float


@dataclass(frozen=True)
class Where:
    """A parsed where record; `problems` lists what was malformed and left out."""

    calls: int
    kinds: tuple[str, ...] = ()
    sites: dict[str, tuple[Site, ...]] = field(default_factory=dict)   # MEMORY_PARTS
    totals: dict[str, int] = field(default_factory=dict)   # part -> bytes grown in all
    stack: tuple[Site, ...] = ()
    stack_samples: tuple[int, int] = (0, 0)               # early, late
    ops: tuple[OpTime, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def _frames(raw: object) -> tuple[Frame, ...] | None:
    if not isinstance(raw, list):
        return None
    out: list[Frame] = []
    for fr in raw:
        if (not isinstance(fr, list) or len(fr) != 3 or not isinstance(fr[0], str)
                or not isinstance(fr[1], int) or not isinstance(fr[2], (str, type(None)))):
            return None
        out.append((fr[0], fr[1], fr[2] or "?"))
    return tuple(out)


def _int(d: Mapping[str, object], key: str) -> int:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _num(d: Mapping[str, object], key: str) -> float:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _sites(part: object, what: str, problems: list[str]) -> tuple[Site, ...]:
    raw = part.get("sites") if isinstance(part, dict) else None
    if not isinstance(raw, list):
        return ()
    out: list[Site] = []
    for s in raw:
        frames = _frames(s.get("frames")) if isinstance(s, dict) else None
        if frames is None or not isinstance(s, dict):
            problems.append(f"{what}: a site without [file, line, function] frames; left out")
            continue
        out.append(Site(frames, _int(s, "size"), _int(s, "count"), _int(s, "early"),
                        _int(s, "late")))
    return tuple(out)


def parse_where(record: Mapping[str, object]) -> Where:
    """The typed form of a where record; what does not fit is a problem, never raised."""
    problems: list[str] = []
    raw_kinds = record.get("kinds")
    kinds = tuple(k for k in raw_kinds if isinstance(k, str)) if isinstance(
        raw_kinds, list) else ()
    sites: dict[str, tuple[Site, ...]] = {}
    totals: dict[str, int] = {}
    errors: dict[str, str] = {}
    raw_errors = record.get("errors")
    if isinstance(raw_errors, dict):
        errors = {str(k): str(v) for k, v in raw_errors.items()}
    for part in MEMORY_PARTS:
        got = record.get(part)
        if not isinstance(got, dict):
            continue
        if isinstance(got.get("unavailable"), str):
            errors.setdefault(part, str(got["unavailable"]))
            continue
        sites[part] = _sites(got, part, problems)
        unanswered = _int(got, "unanswered")
        failed = got.get("failed")
        if unanswered:
            errors.setdefault(part, f"{unanswered} of {_int(got, 'armed')} worker processes "
                                    "did not say what they hold before the agent stopped "
                                    "waiting; the sites are the others'")
        elif _int(got, "gone"):
            errors.setdefault(part, f"{_int(got, 'gone')} of {_int(got, 'armed')} worker "
                                    "processes ended before the measured phase did; their "
                                    "sites are not in")
        elif isinstance(failed, list) and failed:
            errors.setdefault(part, f"{len(failed)} of {_int(got, 'armed')} worker processes "
                                    f"could not say what they hold ({str(failed[0])[:200]})")
        if part == "heap":
            totals[part] = _int(got, "traced_end") - _int(got, "traced_start")
        else:
            totals[part] = _int(got, "total")
    stack = record.get("stack")
    stack_sites: tuple[Site, ...] = ()
    samples = (0, 0)
    if isinstance(stack, dict):
        stack_sites = _sites(stack, "stack", problems)
        windows = stack.get("windows")
        if isinstance(windows, dict):
            early, late = windows.get("early"), windows.get("late")
            samples = (_int(early, "samples") if isinstance(early, dict) else 0,
                       _int(late, "samples") if isinstance(late, dict) else 0)
    ops: list[OpTime] = []
    raw_ops = record.get("ops")
    if isinstance(raw_ops, dict):
        listed = raw_ops.get("ops")
        for o in listed if isinstance(listed, list) else []:
            if not isinstance(o, dict) or not isinstance(o.get("name"), str):
                problems.append("ops: an op without a name; left out")
                continue
            ops.append(OpTime(o["name"], str(o.get("op") or ""), _num(o, "early_us"),
                              _num(o, "late_us")))
    return Where(_int(record, "calls"), kinds, sites, totals, stack_sites, samples,
                 tuple(ops), errors, tuple(problems))
