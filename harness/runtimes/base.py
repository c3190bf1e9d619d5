"""The Runtime protocol: how a cell becomes a running agent, and what comes back."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harness.errors import EnvironmentUnavailable
from harness.matrixfile.model import (
    ABILITIES,
    BUDGET_MIN_CALLS,
    Abilities,
    Cell,
    ImageSpec,
    RunSettings,
    abilities,
)
from harness.protocol import AGENT_DIR

# A budgeted run's readings cost at most this share of its steps' time.
BUDGET_OVERHEAD = 0.05
# A call after the first that has not returned after this long ends the run as a
# timeout that names the call (the agent's --call-timeout); at most 90 % of the cell's
# `timeout:`, so that the agent says it before the deadline kills it.
CALL_TIMEOUT_S = 120.0
# The share of the cell's `timeout:` at which the agent ends a call still under way (its
# --call-timeout at most; the first call's, which no call timeout ends, at the deadline:
# the agent's DEADLINE_SHARE, the same 90 %).
DEADLINE_SHARE = 0.9


def call_timeout(timeout: float) -> float:
    """The agent's --call-timeout for a cell of `timeout` seconds."""
    return min(CALL_TIMEOUT_S, DEADLINE_SHARE * timeout)

if TYPE_CHECKING:
    from harness.gpu.host import HostGpus

__all__ = ["AGENT_DIR", "LABEL", "Capabilities", "ImageInfo", "Progress", "RunOutcome",
           "RunRequest", "Runtime", "own_cgroup", "parse_size"]

LABEL = "harness.managed"
Progress = Callable[[str], None]


@runtime_checkable
class CellEvents(Protocol):
    """A progress sink that also wants to know when a cell starts and ends (the live
    terminal display: harness/report/live.py); a plain `Progress` callable need not."""

    def cell(self, cell: Cell, event: str, result: object) -> None: ...


@dataclass(frozen=True)
class ImageInfo:
    """What was actually run: digest/interpreter, labels, and seconds spent preparing."""

    ref: str
    digest: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    python: str = "python3"
    prepare_s: float = 0.0
    env: tuple[str, ...] = ()         # the image config's ENV (CUDA_VERSION=...)


@dataclass(frozen=True)
class RunRequest:
    cell: Cell
    image: ImageInfo
    outdir: Path                      # host directory, writable, holds samples.jsonl
    control: Path                     # host path of the early-stop control file
    cancel: threading.Event | None = None   # set on Ctrl-C: kill the cell now
    attribute: tuple[str, ...] = ()   # `harness explain`: the agent's --attribute kinds
    durable: bool = True              # False: outdir is thrown away after (--no-fsync)

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def as_user_s(self) -> float | None:
        """The seconds of steps the agent times again as the user's interpreter runs them
        (its --as-user: a second agent after the measured phase, with the allocator
        settings the quiet heap changed put back), or None where it does not: the run
        already has them (`pythonmalloc: false`, `heap: stock`); an attributed run
        (explain's); a GPU cell (a second process would hold a second device context); a
        cell with a memory limit (its memory would count against it); a run whose budget
        holds its warm-up (harness.check's, a marked test's: each costs its budget)."""
        s = self.cell.settings
        if not (s.pythonmalloc or s.heap == "quiet") or self.attribute:
            return None
        if self.cell.gpu.wants_gpu or s.mem_limit or s.warmup_share:
            return None
        return AS_USER_S

    def agent_args(self, agent: str, scenario: str, out: str, control: str) -> list[str]:
        s = self.cell.settings

        args = [agent, "--scenario", scenario, "--params",
                json.dumps(dict(self.cell.scenario.params), sort_keys=True),
                "--iterations", str(s.agent_iterations), "--warmup", str(s.warmup),
                "--sample-every", str(s.sample_every),
                "--sample-interval", str(s.sample_interval),
                "--out", out, "--control", control, "--quiet",
                "--call-timeout", f"{call_timeout(s.timeout):g}",
                "--deadline", f"{s.timeout:g}"]
        if not self.cell.gpu.wants_gpu:
            args.append("--no-gpu")
        if self.attribute:
            args += ["--attribute", ",".join(self.attribute)]
        args += ["--heap", s.heap]
        if s.time_only:
            args.append("--no-heap")
        if (seconds := self.as_user_s()) is not None:
            args += ["--as-user", f"{seconds:g}"]
        if not self.durable:
            args.append("--no-fsync")
        if (budget := s.run_budget) is not None:
            # Early stop runs for its time budget (at least BUDGET_MIN_CALLS calls, or a
            # run again's `budget_calls`; at most max_iterations): readings spread over
            # the budget, each costing at most BUDGET_OVERHEAD of the steps' time (a
            # heap reading collects garbage).
            args += ["--budget", f"{budget:g}", "--budget-min",
                     str(min(s.budget_calls or BUDGET_MIN_CALLS, s.agent_iterations)),
                     "--max-overhead", f"{BUDGET_OVERHEAD:g}"]
            if s.warmup_share:
                args += ["--warmup-share", f"{s.warmup_share:g}"]
            if self.attribute:
                # An attributed run (explain) makes its least calls, as a fixed run
                # would, within its deadline: not cut at ten budgets.
                args += ["--budget-max", f"{s.timeout:g}"]
            elif (most := measure_cap(s)) is not None:
                args += ["--budget-max", f"{most:g}"]
        return args

    def environment(self) -> dict[str, str]:
        """The cell's environment, the one place every runtime takes it from: the
        matrix's `env:`, then the allocator settings of `pythonmalloc` and `heap`
        (before the interpreter starts, which is the only time they take effect)."""
        s = self.cell.settings
        env = dict(s.env)
        given = {name: env.get(name) for name in ALLOCATOR_ENV}
        if s.pythonmalloc:
            env.setdefault("PYTHONMALLOC", "malloc")
        if s.heap == "quiet":
            env["GLIBC_TUNABLES"] = quiet_tunables(env.get("GLIBC_TUNABLES"))
        undo = {name: value for name, value in given.items() if env.get(name) != value}
        if undo:
            # The agent puts these back before the scenario runs, so the processes it
            # starts (a spawned pool's workers, a subprocess) allocate as they would for
            # a user: under PYTHONMALLOC=malloc a spawned worker's leak read flat for its
            # first ~2,500 calls (issue 78). Only the agent's own heap is read quiet.
            env[CHILD_ENV] = json.dumps(undo, sort_keys=True)
        if not self.cell.gpu.wants_gpu:
            # NGC images set NVIDIA_VISIBLE_DEVICES=all: on an engine whose default runtime
            # is nvidia a "CPU" cell would get every GPU. `void` makes the toolkit inject
            # nothing (no device, no driver library).
            env.setdefault("NVIDIA_VISIBLE_DEVICES", "void")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        return env


def measure_cap(s: RunSettings) -> float | None:
    """The most seconds a budgeted attempt's measured phase runs where the cell has an
    `overrun` bound: what a run again was left (`budget_max`), or for a first attempt
    the bound less its warm-up's budget; None: the agent's own cap (10 budgets)."""
    if s.budget_max is not None:
        return s.budget_max
    budget = s.run_budget
    if s.overrun is None or budget is None:
        return None
    return max(budget, (s.overrun - 1) * budget)


def quiet_tunables(given: str | None) -> str:
    """GLIBC_TUNABLES with glibc's per-thread cache off (tcache_count=0), the matrix's
    own tunables kept. The tcache keeps up to ~240 KiB of freed chunks that mallinfo
    counts as in use, filling over the first hundreds of calls like a leak. A
    tcache_count the matrix set itself stands."""
    parts = [p for p in (given or "").split(":") if p]
    if not any(p.startswith(TCACHE + "=") for p in parts):
        parts.append(TCACHE + "=0")
    return ":".join(parts)


TCACHE = "glibc.malloc.tcache_count"
# The seconds of steps a run times again as the user's interpreter runs them (the agent's
# --as-user, `RunRequest.as_user_s`): half a second holds thousands of a cheap step's calls
# and a handful of a slow one's (the second agent makes 3 at least, for 5 s at most).
AS_USER_S = 0.5
# The allocator settings the cell's agent runs under, and the variable that hands the
# matrix's own values (null: unset) to the agent for the processes it starts.
ALLOCATOR_ENV = ("PYTHONMALLOC", "GLIBC_TUNABLES")
CHILD_ENV = "HARNESS_CHILD_ENV"


@dataclass
class RunOutcome:
    """How the process/container ended. A leak is not decided here."""

    exit_code: int | None
    timed_out: bool = False
    oom_killed: bool = False
    error: str | None = None          # the harness's own view, e.g. "engine lost"
    duration_s: float = 0.0
    host_samples: list[dict[str, Any]] = field(default_factory=list)
    log_tail: str = ""
    mem_limit_bytes: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "timed_out": self.timed_out,
                "oom_killed": self.oom_killed, "error": self.error,
                "duration_s": round(self.duration_s, 3), "log_tail": self.log_tail[-4000:],
                "mem_limit_bytes": self.mem_limit_bytes, "details": self.details,
                "host_samples": len(self.host_samples)}


# One line of `harness doctor`: its level (ok, warn, FAIL), what it found and the fix;
# each runtime's setup checks and each engine's doctor give them.
Check = tuple[str, str, str]


@dataclass(frozen=True)
class Capabilities:
    """What one runtime can do, in one declaration its class fills (`RuntimeBase`'s
    class attributes over the name's `matrixfile.model.Abilities`). `harness doctor`, the
    plans and the engines ask these, never the object (no `getattr` probing)."""

    product: str             # how `harness doctor` names its engine ("Docker", "Podman")
    abilities: Abilities     # the name's entry: images, cgroup of its own, GPUs by, hosts
    queues_cells: bool       # a cluster scheduler decides what runs when
    probes_gpus: bool        # `gpu_inventory` asks an engine of its own (a probe container)
    resolves_days: bool      # resolves an `as_of:` image per day (`harness day` runs on it)
    builds_hybrids: bool     # its engine builds `harness culprit`'s hybrid images offline

    @property
    def gpu_by(self) -> str:
        """How the engine is asked for a GPU (`Abilities.gpu_by`)."""
        return self.abilities.gpu_by


class Runtime(Protocol):
    """A backend that runs cells. Chosen by name in the matrix (`runtime:`).

    Besides running cells it declares what it can do in one object, `capabilities`
    (`RuntimeBase` fills it from the class's declarations): whether a scheduler queues
    the cells itself, whether its engine lists its GPUs, resolves days or builds hybrid
    images; and it answers how to abort an image build on Ctrl-C, the GPUs its engine
    gives a probe container and doctor's setup checks."""

    name: str
    queues_cells: bool      # a cluster scheduler decides what runs when: submit all at once

    @property
    def capabilities(self) -> Capabilities:
        """What this runtime can do, declared (`Capabilities`): asked, never probed."""

    def abort_prepare(self) -> None:
        """Ctrl-C: stop an image build or venv install in progress, leaving nothing."""

    def gpu_inventory(self, image: str, python: str = "python3") -> HostGpus | None:
        """The GPUs a container of `image` is given on this runtime's engine; None when
        the runtime has no engine of its own to ask (this machine's NVML answers)."""

    def setup_checks(self, wants_gpu: bool) -> list[Check]:
        """`harness doctor`: what this machine lacks for this runtime before its engine
        is asked, as (ok|warn|FAIL, what, fix)."""

    def check(self, cells: list[Cell]) -> None:
        """Raise EnvironmentUnavailable if these cells cannot run here at all."""

    def resolve_ahead(self, cells: list[Cell], progress: Progress) -> None:
        """Before the first cell: what the cells' images need settled once (the local
        runtime resolves each `as_of:` day), saying so through `progress`."""

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        """Make the image available (pull / build venv); raise ImageUnavailable."""

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        """Run one cell to completion or deadline; always clean up what it started."""

    def cleanup(self) -> int:
        """Remove anything this or an earlier, crashed harness left behind; count it."""

    def run_warm(self) -> None:
        """Many short cells in a row follow (`harness.check`, the pytest plugin): run
        each from a warm interpreter where this runtime can (the local one), else as
        before."""

    def warm_ahead(self, cell: Cell, scripts: list[Path]) -> None:
        """The warm interpreter a run of `cell` would fork from, started now with each
        scenario of `scripts` imported, where this runtime runs warm (the pytest
        plugin's, before its first marked test's clock); else nothing."""

    def pins(self, image: ImageSpec) -> tuple[str, ...]:
        """A dated image's requirements as resolved on its day, where this runtime
        resolves days (`capabilities.resolves_days`: `harness day` asks it).

        Raises:
            EnvironmentUnavailable: this runtime resolves no day.
        """


class RuntimeBase:
    """What a runtime does not have to do: no queue, nothing to abort, no engine to ask
    for its GPUs. A runtime subclasses it, declares what it can do in the class
    attributes below (read as one `Capabilities`) and overrides what it does."""

    queues_cells = False
    name: str
    # What the subclass declares it can do beyond its name's `Abilities` (`Capabilities`).
    product = "the engine"
    probes_gpus = False
    resolves_days = False
    builds_hybrids = False

    def run_warm(self) -> None:
        """No warm interpreter to run from: each cell runs as before."""

    def warm_ahead(self, cell: Cell, scripts: list[Path]) -> None:
        """No warm interpreter to start ahead."""

    def pins(self, image: ImageSpec) -> tuple[str, ...]:
        """No day is resolved here (`resolves_days` is False)."""
        raise EnvironmentUnavailable(f"runtime {self.name} resolves no `as_of:` day\n  "
                                     "fix: run the day search on `runtime: local`")

    @property
    def capabilities(self) -> Capabilities:
        """The class's declaration over its name's abilities, in one object."""
        return Capabilities(self.product, self.abilities, self.queues_cells, self.probes_gpus,
                            self.resolves_days, self.builds_hybrids)

    @property
    def abilities(self) -> Abilities:
        """What this runtime can do, as `matrixfile.model.ABILITIES` declares it for its
        name (the one place: matrix validation and the answers read the same entry)."""
        return abilities(self.name)

    @property
    def gpu_by(self) -> str:
        """How this runtime's engine is asked for a GPU (`Abilities.gpu_by`)."""
        return self.abilities.gpu_by

    def abort_prepare(self) -> None:
        """Nothing is built in the background: nothing to abort."""

    def gpu_inventory(self, image: str, python: str = "python3") -> HostGpus | None:
        """No engine of its own: None (the host's NVML answers for a local host)."""
        return None

    def setup_checks(self, wants_gpu: bool) -> list[Check]:
        """`harness doctor`: what this machine lacks for the runtime before its engine is
        asked, as (ok|warn|FAIL, what, fix); nothing to say by default."""
        return []

    def resolve_ahead(self, cells: list[Cell], progress: Progress) -> None:
        """Nothing to settle before the first cell by default."""


def own_cgroup(runtime: str) -> bool:
    """Whether a cell run by the runtime called `runtime` had a memory cgroup of its own,
    which the agent reads as its cgroup mount's root (a container's cgroup namespace), so
    its `cgroup` reading is the cell's. Elsewhere (`local`, and Slurm running `local` in
    its job) that root is the session's or the machine's, never the cell's. By name, as a
    result keeps only its runtime's name ("slurm/<inner>": the inner one's); a name this
    version does not know has none, so no figure that may not be the cell's is shown."""
    name = runtime.rpartition("/")[2]
    return name in ABILITIES and abilities(name).own_cgroup


def parse_size(text: str | None) -> int | None:
    if text is None:
        return None
    units = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
    t = text.strip().lower()
    if t[-1] in units:
        return int(t[:-1]) * units[t[-1]]
    return int(t)
