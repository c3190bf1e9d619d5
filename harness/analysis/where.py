"""Where a cell's memory and time went: the agent's "where" record (`--attribute`), parsed
leniently (`parse_where`), ranked per call and diffed between the last good and the first
bad cell of a row. Sites match across versions by the scenario's innermost frame and
the innermost library function below it, never by library line numbers, which move
between releases. Pure, but for reading a scenario's line through a `Source`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from harness.analysis.records import rate_words

__all__ = ["Change", "OpTime", "Site", "Where", "changes", "diff", "named_above", "notes",
           "parse_where", "shares", "site_key", "summary"]

Frame = tuple[str, int, str]               # file, line, function; innermost first
Source = Callable[[str, int], str | None]  # (file's base name, line) -> the line's text
# "workers": the heap's sites in the processes the step drives, added up over them.
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


TOP = 5                                    # sites a summary names per part


# ---------------------------------------------------------------- naming sites
def library(path: str) -> str:
    """The package a file belongs to ("torch"), else its name; "native" for a bare native
    frame."""
    if not path or path.startswith("<unknown"):
        return "native"
    parts = path.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            i = parts.index(marker)
            if i + 1 < len(parts):
                return re.sub(r"\.py$", "", parts[i + 1])
    return os.path.basename(path)


# Python's angle-bracket names inside a function show as that function (`step`).
INNER = frozenset({"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"})


def _enclosing(name: str) -> str:
    """A qualified name cut before its first comprehension or lambda part ("" if none)."""
    parts = name.split(".")
    kept = parts[:next((i for i, p in enumerate(parts) if p in INNER), len(parts))]
    return ".".join(kept[:-1] if kept[-1:] == ["<locals>"] else kept)


def function(frames: Sequence[Frame], i: int) -> str:
    """The function of frames[i] as its author named it: a comprehension or lambda is the
    function it is written in (a bare `<genexpr>`: the nearest outer named frame)."""
    path, name = frames[i][0], frames[i][2]
    for outer in frames[i:]:
        if outer[0] == path and (named := _enclosing(outer[2])):
            return named
    return name


def site_key(frames: Sequence[Frame], scenario: str) -> str:
    """What matches a site across versions: the scenario's innermost frame (file name,
    line, function) and the innermost library function below it, if any."""
    frames = frames or [("?", 0, "?")]
    at = next((i for i, f in enumerate(frames) if os.path.basename(f[0]) == scenario),
              len(frames) - 1)
    own = frames[at]
    key = f"{os.path.basename(own[0])}:{own[1]} {function(frames, at)}"
    if at:
        key += f" -> {library(frames[0][0])} {function(frames, 0)}"
    return key


def _label(key: str, source: Source | None) -> str:
    """The key with the scenario line's text: "x.py:19 step (md.pop(k)) -> multidict"."""
    if key.startswith("<unknown>:0"):
        return "no Python frame (allocated by a native thread or at start-up)"
    if source is None:
        return key
    m = re.match(r"([^:]+):(\d+) (\S+)(.*)", key)
    if not m:
        return key
    text = source(m.group(1), int(m.group(2)))
    said = f" ({' '.join(text.split())})" if text else ""   # runs of spaces as one
    return f"{m.group(1)}:{m.group(2)} {m.group(3)}{said}{m.group(4)}"


def _rates(sites: Sequence[Site], calls: int, scenario: str) -> dict[str, float]:
    """Site key -> bytes per call (sites with the same key added up)."""
    out: dict[str, float] = {}
    for s in sites:
        k = site_key(s.frames, scenario)
        out[k] = out.get(k, 0.0) + s.size / max(calls, 1)
    return out


def _matching(rates: Mapping[str, float], scenario: str) -> dict[str, tuple[float, str]]:
    """Match key -> (bytes per call, the site's key to show). A site without the scenario's
    frame (a framework's thread) matches by its innermost library function alone."""
    out: dict[str, tuple[float, str]] = {}
    for key, rate in rates.items():
        own = key.startswith(f"{scenario}:")
        match = key if own or " -> " not in key else key.split(" -> ", 1)[1]
        was = out.get(match)
        out[match] = (rate + (was[0] if was else 0.0), was[1] if was else key)
    return out


def per_call(rate: float) -> str:
    """A site's rate as every rate in words is written (`records.rate_words`)."""
    return rate_words(rate)


# Code that reads a file or builds code once: a site whose innermost frame is here is a
# one-time allocation, however a short run divides it per call.
ONE_TIME = re.compile(r"^(linecache|tokenize|zipimport)\.py$|^<frozen (importlib|zipimport)"
                      r"|^importlib$")


# The worker pools' own loops: a worker's site ending in them is a task's message in
# transit, not what a task keeps.
POOL_LOOP = re.compile(r"^(queues|connection|reduction|pool|process|synchronize)\.py:\d+ "
                       r"(SimpleQueue|Queue|_?Connection|_ConnectionBase|ForkingPickler|worker"
                       r"|_process_worker|BaseProcess|mapstar|starmapstar)\b")


def pool_loop(key: str) -> bool:
    """Whether a worker's site (`site_key`) is its pool's own loop (POOL_LOOP)."""
    return bool(POOL_LOOP.match(key))


def one_time(key: str) -> bool:
    """Whether a site's key (`site_key`) ends in code that allocates once (ONE_TIME)."""
    if " -> " not in key:
        return False
    lib = key.split(" -> ", 1)[1].rsplit(" ", 1)[0]
    return bool(ONE_TIME.search(lib))


# ---------------------------------------------------------------- one cell in words
MIN_RATE = 51.2          # bytes/call a site must grow to be named (+51 B/call shown)
# Parts that do not apply to a scenario (no torch imported) are not news.
NOT_NEWS = re.compile(r"not imported|neither .* imported|no torch|no TensorFlow|no framework",
                      re.IGNORECASE)


def named_above(part: str, floors: Mapping[str, float], least: float = MIN_RATE) -> float:
    """The bytes per call a site of a memory part must grow to be named: `least`, or the
    part's floor (`floors`) where higher, so a short run's one-time allocation is not."""
    return max(least, floors.get(part, 0.0))


def summary(w: Where, scenario: str, source: Source | None = None, top: int = TOP,
            floors: Mapping[str, float] = MappingProxyType({}), least: float = MIN_RATE,
            keep: Callable[[str, float], bool] | None = None,
            parts: Sequence[str] = MEMORY_PARTS) -> list[str]:
    """What one attributed run shows, a line each: the largest sites per call of each
    memory part (above `named_above`; `keep` filters what may be named), where the late
    steps' time went, and the ops that grew."""
    lines: list[str] = []
    for part in MEMORY_PARTS:
        if part not in w.sites or part not in parts:
            continue
        rates = sorted(((k, r) for k, r in _rates(w.sites[part], w.calls, scenario).items()
                        if (keep is None or keep(k, r))
                        and not (part == "workers" and pool_loop(k))), key=lambda kv: -kv[1])
        above = named_above(part, floors, least)
        shown = [(k, r) for k, r in rates if r >= above][:top]
        for k, r in shown:
            lines.append(f"{part}: {per_call(r)} at {_label(k, source)}")
        if not shown:
            under = any(r >= least for _, r in rates)     # only under the floor
            lines.append(f"{part}: no site grew over {w.calls} calls" + (
                f" above the run's floor ({above:,.0f} B/call)" if under else ""))
    lines += _stack_lines(w, scenario, source, top)
    lines += _ops_lines(w, top)
    return lines


def notes(w: Where, heap_rate: float | None = None) -> list[str]:
    """How much of the heap's growth (`heap_rate`, bytes/call) Python's allocator saw, the
    rest native; and the parts that could not be taken."""
    lines: list[str] = []
    if "heap" in w.totals and heap_rate is not None and heap_rate >= MIN_RATE:
        seen = max(w.totals["heap"] / max(w.calls, 1), 0.0)
        rest = heap_rate - seen
        if seen >= heap_rate:
            # All of it via PyMem/PyObject, which C extensions call too: the site below
            # is where it was allocated, whatever the language.
            lines.append(f"heap: Python's allocator saw {per_call(seen)} in the attributed run, as "
                         f"much as the heap grew in the sweep ({per_call(heap_rate)}): all of it "
                         "went through Python's allocator (from Python code or from a C "
                         "extension calling it), so the sites account for it")
        else:
            lines.append(f"heap: Python's allocator saw {per_call(seen)} of the heap's "
                         f"{per_call(heap_rate)}"
                         + (f"; the rest, {per_call(rest)}, is native, not seen by Python's "
                            "allocator" if rest > 0.1 * heap_rate else ""))
    for part, why in w.errors.items():
        # "all": the whole run (it ended before its measured phase)
        if (part in w.kinds or part == "all" or (part == "workers" and part in w.sites)) \
                and not NOT_NEWS.search(why):
            lines.append(f"{part}: not attributed: {why}")
    return lines


def _function_key(key: str) -> str:
    """A stack's match key: a site in the scenario's code is its function, whichever of
    its lines the samples fell on; a call into a library stays the scenario's line."""
    if " -> " in key:
        return key
    m = re.match(r"([^:]+):\d+ (.*)", key)
    return f"{m.group(1)} {m.group(2)}" if m else key


def _stack_groups(w: Where, scenario: str) -> dict[str, tuple[str, float, float]]:
    """Function key -> (its most sampled line's key, early share, late share)."""
    early_n, late_n = (max(n, 1) for n in w.stack_samples)
    sums: dict[str, tuple[float, float]] = {}
    for s in w.stack:
        k = site_key(s.frames, scenario)
        e, l_ = sums.get(k, (0.0, 0.0))
        sums[k] = (e + s.early / early_n, l_ + s.late / late_n)
    out: dict[str, tuple[str, float, float]] = {}
    best: dict[str, float] = {}
    for k, (e, l_) in sums.items():
        f = _function_key(k)
        shown, e0, l0 = out.get(f, (k, 0.0, 0.0))
        if e + l_ > best.get(f, -1.0):
            best[f], shown = e + l_, k
        out[f] = (shown, e0 + e, l0 + l_)
    return out


def shares(w: Where, scenario: str) -> dict[str, tuple[float, float]]:
    """Stack key -> (early share, late share), a function's lines added up."""
    return {shown: (e, l_) for shown, e, l_ in _stack_groups(w, scenario).values()}


def _stack_lines(w: Where, scenario: str, source: Source | None, top: int) -> list[str]:
    if not w.stack:
        return []
    rows = sorted(shares(w, scenario).items(), key=lambda kv: -kv[1][1])[:top]
    return [f"time: {late:.0%} of late samples (early {early:.0%}) in {_label(k, source)}"
            for k, (early, late) in rows if late >= 0.05 or early >= 0.05]


def _ops_lines(w: Where, top: int) -> list[str]:
    rows = sorted(w.ops, key=lambda o: -(o.late_us - o.early_us))[:top]
    return [f"op {_op_name(o)}: {_ms(o.early_us)} early, {_ms(o.late_us)} late"
            for o in rows if o.late_us > 0]


def _op_name(o: OpTime) -> str:
    return f"{o.name} ({o.op})" if o.op and o.op != o.name else o.name


def _ms(us: float) -> str:
    return f"{us / 1000:.2f} ms/call" if us >= 100 else f"{us:.0f} µs/call"


# ---------------------------------------------------------------- good vs bad
WHOLE = "whole run"     # a time change's detail: shares of a whole run's samples


def _whole(w: Where, scenario: str) -> dict[str, tuple[str, float]]:
    """Function key -> (the key to show, its share of all the run's stack samples)."""
    early_n, late_n = w.stack_samples
    total = max(early_n + late_n, 1)
    return {f: (k, (e * early_n + l_ * late_n) / total)
            for f, (k, e, l_) in _stack_groups(w, scenario).items()}


def _between(good: Where, bad: Where, scenario: str, source: Source | None,
             top: int) -> list[Change]:
    """Time changes between two runs: each function's share of samples, bad against good,
    largest rise first (5 points at least)."""
    b, g = _whole(bad, scenario), _whole(good, scenario) if good.stack else {}
    rise = {f: share - g.get(f, ("", 0.0))[1] for f, (_, share) in b.items()}
    return [Change("time", _label(b[f][0], source), f"{b[f][1]:.0%}",
                   f"{g.get(f, ('', 0.0))[1]:.0%}", WHOLE)
            for f in sorted(b, key=lambda f: -rise[f])[:top] if rise[f] >= 0.05]
@dataclass(frozen=True)
class Change:
    """One row of the answer: a site (or op) of the first bad cell against the last good."""

    part: str            # heap, device, native; time (stack samples); op
    site: str            # where, with the scenario line's text
    bad: str             # its value in the bad cell: "+5.9 KiB/call", "73%", "3.00 ms/call"
    good: str | None     # in the good cell ("0" where absent); None: nothing to match with
    detail: str = ""     # time: "early 33%"; op: "rising" (late well over early)

    def line(self, good_label: str, bad_label: str) -> str:
        """The change in words, as the console, report.md and the issue draft say it."""
        if self.part == "op":
            rising = " and rising" if self.detail == "rising" else ""
            return (f"op {self.site}: "
                    + (f"{self.good} in {good_label}, " if self.good is not None else "")
                    + f"{self.bad}{rising} in {bad_label}")
        was = f"; {self.good} in {good_label}" if self.good is not None else ""
        if self.part == "time" and self.detail == WHOLE:
            return f"time: {self.bad} of samples in {self.site} in {bad_label}{was}"
        if self.part == "time":
            return (f"time: {self.bad} of late samples in {self.site} in {bad_label} "
                    f"({self.detail}){was}")
        return f"{self.part}: {self.bad} at {self.site} in {bad_label}{was}"

    def cells(self) -> tuple[str, str, str, str]:
        """(what, site, bad, good): a row of report.html's table."""
        bad = (f"{self.bad} of samples" if self.detail == WHOLE
               else f"{self.bad} of late samples ({self.detail})" if self.part == "time"
               else f"{self.bad}, rising" if self.detail == "rising" else self.bad)
        return self.part, self.site, bad, "-" if self.good is None else self.good


def changes(good: Where | None, bad: Where, scenario: str, source: Source | None = None,
            top: int = TOP, floors: Mapping[str, float] = MappingProxyType({}),
            between: bool = False) -> list[Change]:
    """The answer: the bad cell's sites matched with the good one's, largest growth first.
    `between`: a `regression` between runs, so time is each site's share of the whole run
    beside the good cell's, not late vs early."""
    out: list[Change] = []
    for part in MEMORY_PARTS:
        if part not in bad.sites:
            continue
        least = named_above(part, floors)
        b = _matching(_rates(bad.sites[part], bad.calls, scenario), scenario)
        g = _matching(_rates(good.sites.get(part, ()), good.calls, scenario), scenario) if (
            good is not None) else {}
        ranked = sorted(b.items(), key=lambda kv: -(kv[1][0] - g.get(kv[0], (0.0, ""))[0]))
        for match, (rate, k) in ranked[:top]:
            before = g.get(match, (0.0, ""))[0]
            if rate - before < least:
                continue
            was = "0" if before < MIN_RATE else per_call(before)
            out.append(Change(part, _label(k, source), per_call(rate),
                              was if good is not None else None))
    if bad.stack and between and good is not None:
        out += _between(good, bad, scenario, source, top)
    elif bad.stack:
        b_sh = _stack_groups(bad, scenario)
        g_sh = _stack_groups(good, scenario) if good is not None and good.stack else {}

        def rise(f: str) -> float:   # good -> bad, or early -> late without a good cell
            _, early, late = b_sh[f]
            return late - (g_sh[f][2] if f in g_sh else 0.0 if good is not None else early)

        for f in sorted(b_sh, key=lambda f: -rise(f))[:top]:
            k, early, late = b_sh[f]
            before = g_sh[f][2] if f in g_sh else 0.0
            if late - before < 0.05 and late - early < 0.05:
                continue
            out.append(Change("time", _label(k, source), f"{late:.0%}",
                              f"{before:.0%}" if good is not None else None,
                              f"early {early:.0%}"))
    if bad.ops:
        g_ops = {o.name: o for o in good.ops} if good is not None else {}
        grown = sorted(bad.ops, key=lambda o: -(o.late_us - g_ops[o.name].late_us
                                                if o.name in g_ops else o.late_us))
        for o in grown[:top]:
            prev = g_ops.get(o.name)
            rising = "rising" if o.late_us > 1.5 * max(o.early_us, 1e-9) else ""
            out.append(Change("op", _op_name(o), _ms(o.late_us),
                              _ms(prev.late_us) if prev is not None else None, rising))
    return out


def diff(good: Where | None, bad: Where, scenario: str, good_label: str, bad_label: str,
         source: Source | None = None, top: int = TOP,
         floors: Mapping[str, float] = MappingProxyType({})) -> list[str]:
    """The answer in words, a line per change (`changes`)."""
    return [c.line(good_label, bad_label)
            for c in changes(good, bad, scenario, source, top, floors)]
