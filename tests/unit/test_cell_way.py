"""A cell's way from its run to its stored result, traced (issue 64): one sweep over the
fake runtime, every call into `harness` recorded with `sys.setprofile` (all threads).

What is on the way (the rule the figures follow):

- The way starts at `stages.orchestrator.Sweep._one` for the traced cell.
- A call is on the way when a frame on the way makes it into a `harness` module (a real
  source file: the `__init__` a dataclass generates is no call site) and it receives a
  carrier: the cell (a `Cell` with its id, or the id), or a value an on-the-way call
  returned (`CellRun`, `Ran`, `Measured`, `Job`, `RoundsPlan`, `CellResult`...) or a
  field of one; an argument holding a carrier in a field (a `CellFacts`) carries it.
  A carrier's own property or method (`cell.settings`, `cell.with_settings`) is the
  value itself, not a module it is handed to. The baseline's
  runs in the rounds get no carrier: they are the baseline's way.
- The way is followed through the modules that hand the cell on: the orchestrator and
  `harness.stages`, less the services the stages' `Context` holds (the image pool, the
  GPU facts, the run). Any other module it enters is a service, one step whose insides
  are its own, counted by package (`harness.store`, `harness.analysis`...) or, in
  `harness.stages`, by module. Calls within one module (with a carrier) are followed,
  never steps.
- Figures: call sites, the distinct lines a step is made from; modules, the distinct
  modules and services entered (the orchestrator with them); re-entries: with the
  modules that hand the cell on listed in first-entry order, one entered by a new step
  while none of its frames runs, after a module first entered later than it was
  entered and left. A step made again from the same line (a loop's next attempt or
  round) is the same step. Climbing: a step from below into `harness.stages.orchestrator`.
  A service may be asked by several stages (it is below them all): its fan-in, the
  modules that ask it, is printed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from fakeruntime import Behaviour
from sweepkit import swept

from harness.matrixfile.model import Cell
from harness.result.model import CellResult

ROOT = Path(__file__).resolve().parents[2]
HARNESS = str(ROOT / "harness")
MAX_MODULES = 12
MAX_SITES = 25
PRIMITIVE = (str, bytes, int, float, bool, type(None), Path)


def module_of(frame: FrameType) -> str | None:
    """The harness module a frame runs in (None: outside harness, or generated code)."""
    if not frame.f_code.co_filename.startswith(HARNESS):
        return None
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) and name.startswith("harness") else None


def services_of(ctx: object) -> set[str]:
    """The modules of the services a stages `Context` holds (bound methods by their
    object's class)."""
    out = set()
    for f in dataclasses.fields(ctx):  # type: ignore[arg-type]
        value = getattr(ctx, f.name)
        owner = getattr(value, "__self__", value)
        out.add(type(owner).__module__)
    return out


def is_own(frame: FrameType, args: list[object]) -> bool:
    """Whether the call is a property or method of its first argument's own class."""
    if not args or isinstance(args[0], PRIMITIVE):
        return False
    found = type(args[0]).__dict__.get(frame.f_code.co_name)
    if isinstance(found, (property, functools.cached_property)):
        return True
    return getattr(found, "__code__", None) is frame.f_code


@dataclass
class Step:
    site: str       # caller module:line
    caller: str
    callee: str     # the module, or a service's package
    function: str


@dataclass
class Way:
    """One cell's way, as traced."""

    cell_id: str
    steps: list[Step] = field(default_factory=list)
    reentries: list[str] = field(default_factory=list)
    climbs: list[str] = field(default_factory=list)
    services: set[str] = field(default_factory=set)
    _carriers: dict[int, object] = field(default_factory=dict)
    _on: dict[int, str] = field(default_factory=dict)       # on-way frame id -> module
    _asked: set[int] = field(default_factory=set)           # services' frames on the way
    _live: dict[str, int] = field(default_factory=dict)     # module -> live way frames
    _order: list[str] = field(default_factory=list)         # first-entry order
    _left_after: dict[str, set[str]] = field(default_factory=dict)  # module -> left since
    _sites: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def modules(self) -> list[str]:
        return list(dict.fromkeys(["harness.stages.orchestrator"]
                                  + [s.callee for s in self.steps]))

    @property
    def sites(self) -> list[str]:
        return sorted({s.site for s in self.steps})

    def fan_in(self) -> dict[str, list[str]]:
        """Each service, and the modules on the way that ask it."""
        out: dict[str, list[str]] = {}
        for s in self.steps:
            if not self.follows(s.callee) and s.caller not in out.setdefault(s.callee, []):
                out[s.callee].append(s.caller)
        return out

    def follows(self, module: str) -> bool:
        """Whether the way is followed through `module` (it hands the cell on)."""
        return module == "harness.stages.orchestrator" or (
            module.startswith("harness.stages.") and module not in self.services)

    def named(self, module: str) -> str:
        """A module as the figures count it: a service outside the stages by package."""
        if self.follows(module) or module.startswith("harness.stages."):
            return module
        return ".".join(module.split(".")[:2])

    def carries(self, value: object, depth: int = 1) -> bool:
        if isinstance(value, str):
            return value == self.cell_id
        if isinstance(value, PRIMITIVE):
            return False
        if id(value) in self._carriers:
            return True
        if isinstance(value, (Cell, CellResult)):
            return value.id == self.cell_id
        if depth and dataclasses.is_dataclass(value) and not isinstance(value, type):
            return any(self.carries(getattr(value, f.name, None), depth - 1)
                       for f in dataclasses.fields(value))
        if depth and isinstance(value, (list, tuple)):
            return any(self.carries(v, depth - 1) for v in value[:8])
        return False

    def holds_cell(self, value: object) -> bool:
        """Whether `value` holds the cell (or its result) in a field (a `CellRun`)."""
        return dataclasses.is_dataclass(value) and not isinstance(value, type) and any(
            isinstance(v, (Cell, CellResult)) and v.id == self.cell_id
            for v in (getattr(value, f.name, None) for f in dataclasses.fields(value)))

    def keep(self, value: object) -> None:
        """A value an on-the-way call returned, and its fields, carry the cell on."""
        if isinstance(value, PRIMITIVE):
            return
        self._carriers[id(value)] = value
        parts: list[object] = (
            [getattr(value, f.name, None) for f in dataclasses.fields(value)]
            if dataclasses.is_dataclass(value) and not isinstance(value, type)
            else list(value) if isinstance(value, (list, tuple)) else [])
        for v in parts:
            if not isinstance(v, PRIMITIVE):
                self._carriers[id(v)] = v

    def args(self, frame: FrameType) -> list[object]:
        code = frame.f_code
        n = code.co_argcount + code.co_kwonlyargcount
        n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
        return [frame.f_locals.get(name) for name in code.co_varnames[:n]]

    def enter(self, module: str, site: str) -> None:
        """A step into a module that hands the cell on: a re-entry when none of its
        frames runs, it was entered before, and a later module has been left since."""
        if module not in self._order:
            self._order.append(module)
        elif not self._live.get(module) and site not in self._sites and self._left_after[
                module]:
            self.reentries.append(f"{module} from {site} (after "
                                  f"{', '.join(sorted(self._left_after[module]))} left)")
        self._left_after[module] = set()
        self._sites.add(site)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self._call(frame)
        elif event == "return" and id(frame) in self._asked:
            with self._lock:
                self._asked.discard(id(frame))
                self.keep(arg)      # a service's answer carries the cell on too
        elif event == "return" and id(frame) in self._on:
            with self._lock:
                module = self._on.pop(id(frame))
                self.keep(arg)
                self.returned(module)

    def returned(self, module: str) -> None:
        """A way frame of `module` returned; its last: every module first entered
        before it has seen a later module left."""
        self._live[module] -= 1
        if not self._live[module]:
            for earlier in self._order[:self._order.index(module)]:
                self._left_after[earlier].add(module)

    def _call(self, frame: FrameType) -> None:
        callee = module_of(frame)
        if callee is None:
            return
        caller_frame = frame.f_back
        with self._lock:
            if (callee == "harness.stages.orchestrator" and frame.f_code.co_name == "_one"
                    and self.carries(frame.f_locals.get("cell"), 0)):
                self.services = services_of(frame.f_locals["self"].ctx)
                self.enter(callee, "start")
                self._mark(frame, callee)
                return
            if caller_frame is None or id(caller_frame) not in self._on:
                return
            caller = self._on[id(caller_frame)]
            args = self.args(frame)
            if not any(self.carries(v) for v in args):
                return
            if callee == caller:
                self._mark(frame, callee)   # within one module: followed, not a step
                return
            if (self.carries(args[0], 0) or self.holds_cell(args[0])) and is_own(frame, args):
                return      # the carrier's own property or method
            site = f"{caller}:{caller_frame.f_lineno}"
            self.steps.append(Step(site, caller, self.named(callee), frame.f_code.co_name))
            if callee == "harness.stages.orchestrator":
                self.climbs.append(site)
            if self.follows(callee):
                self.enter(callee, site)
                self._mark(frame, callee)
            else:
                self._asked.add(id(frame))

    def _mark(self, frame: FrameType, module: str) -> None:
        self._on[id(frame)] = module
        self.running(module)

    def running(self, module: str) -> None:
        self._live[module] = self._live.get(module, 0) + 1

    def figures(self) -> str:
        return (f"{len(self.sites)} call sites, {len(self.modules)} modules, "
                f"{len(self.reentries)} re-entries, {len(self.climbs)} climbs")

    def said(self) -> str:
        seen: set[tuple[str, str]] = set()
        lines = [self.figures()]
        for s in self.steps:
            if (s.site, s.function) not in seen:
                seen.add((s.site, s.function))
                lines.append(f"  {s.site} -> {s.callee}.{s.function}")
        lines.append("modules: " + ", ".join(self.modules))
        lines += [f"service {k} asked by {', '.join(v)}" for k, v in self.fan_in().items()]
        return "\n".join(lines + [f"re-entry: {r}" for r in self.reentries])


@contextlib.contextmanager
def traced(way: Way) -> Iterator[Way]:
    """Profile every thread while the block runs."""
    old = sys.getprofile()
    threading.setprofile(way.profile)
    sys.setprofile(way.profile)
    try:
        yield way
    finally:
        sys.setprofile(old)
        threading.setprofile(None)


def way_of(tmp_path: Path, behave: dict[str, Behaviour]) -> Way:
    """v2's way in a sweep of v1 (its row's baseline, run first) and v2."""
    with traced(Way("v2.gpu0.loop")) as way:
        run = swept(tmp_path, ["v1", "v2"], behave)
    assert run.results["v2.gpu0.loop"].vs_baseline is not None
    print(way.said())
    return way


def rounds_ran(way: Way) -> bool:
    """Whether the cell's comparison ran rounds: the settling asks the run service (the
    rounds' runs), which only the measuring asks otherwise."""
    return any(s.caller == "harness.stages.settle" and s.function == "run"
               and s.callee == "harness.stages.context" for s in way.steps)


def check(way: Way) -> None:
    assert way.climbs == [], way.said()
    assert way.reentries == [], way.said()
    assert len(way.modules) <= MAX_MODULES, way.said()
    assert len(way.sites) <= MAX_SITES, way.said()


def test_a_compared_cells_way_enters_each_module_once(tmp_path: Path) -> None:
    way = way_of(tmp_path, {})
    assert not rounds_ran(way), way.said()
    check(way)


def test_a_cell_confirmed_in_rounds_enters_each_module_once(tmp_path: Path) -> None:
    way = way_of(tmp_path, {"v2": Behaviour(step_s=0.002)})
    assert rounds_ran(way), way.said()
    check(way)


def test_the_rule_counts_a_stage_entered_again_after_a_later_one_left() -> None:
    way = Way("x")

    def step(module: str, site: str) -> None:   # a call into `module` that returns
        way.enter(module, site)
        way.running(module)
        way.returned(module)

    way.enter("o", "start")
    way.running("o")
    step("a", "o:1")
    step("a", "o:1")    # a loop's next turn: the same step
    step("b", "o:2")
    assert way.reentries == []
    step("b", "a:9")    # b again, no later module left since: asked again, no re-entry
    assert way.reentries == []
    step("a", "b:5")    # a again from a new line, after b (entered later) left
    assert way.reentries == ["a from b:5 (after b left)"]


def test_the_page_states_the_figures_held_here() -> None:
    page = " ".join((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split())
    assert (f"`tests/unit/test_cell_way.py` traces it: at most {MAX_MODULES} modules, "
            f"{MAX_SITES} call sites, no stage re-entered once left.") in page
