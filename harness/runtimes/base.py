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
# A call running this long ends the run as a timeout naming it (--call-timeout) ...
CALL_TIMEOUT_S = 120.0
# ... at most this share of `timeout:`, so the agent says it before the deadline kills.
DEADLINE_SHARE = 0.9


def call_timeout(timeout: float) -> float:
    """The agent's --call-timeout for a cell of `timeout` seconds."""
    return min(CALL_TIMEOUT_S, DEADLINE_SHARE * timeout)

if TYPE_CHECKING:
    from harness.gpu.host import HostGpus

__all__ = ["AGENT_DIR", "LABEL", "Capabilities", "ImageInfo", "Progress", "RunOutcome",
           "RunRequest", "Runtime", "cpu_pressure", "own_cgroup", "parse_size"]

LABEL = "harness.managed"
Progress = Callable[[str], None]


@runtime_checkable
class CellEvents(Protocol):
    """A progress sink told when a cell starts and ends (the live display)."""

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
        """Seconds of steps timed again under the user's allocator (--as-user), or None
        where not needed or too costly (GPU, memory limit, attributed run)."""
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
            # Readings spread over the budget, costing at most BUDGET_OVERHEAD of it.
            args += ["--budget", f"{budget:g}", "--budget-min",
                     str(min(s.budget_calls or BUDGET_MIN_CALLS, s.agent_iterations)),
                     "--max-overhead", f"{BUDGET_OVERHEAD:g}"]
            if s.warmup_share:
                args += ["--warmup-share", f"{s.warmup_share:g}"]
            if self.attribute:
                # An attributed run makes its least calls within its deadline.
                args += ["--budget-max", f"{s.timeout:g}"]
            elif (most := measure_cap(s)) is not None:
                args += ["--budget-max", f"{most:g}"]
        return args

    def environment(self) -> dict[str, str]:
        """The cell's environment: `env:`, then the allocator settings (at start only)."""
        s = self.cell.settings
        env = dict(s.env)
        given = {name: env.get(name) for name in ALLOCATOR_ENV}
        if s.pythonmalloc:
            env.setdefault("PYTHONMALLOC", "malloc")
        if s.heap == "quiet":
            env["GLIBC_TUNABLES"] = quiet_tunables(env.get("GLIBC_TUNABLES"))
        undo = {name: value for name, value in given.items() if env.get(name) != value}
        if undo:
            # The agent puts these back, so the processes it starts allocate as a user's.
            env[CHILD_ENV] = json.dumps(undo, sort_keys=True)
        if not self.cell.gpu.wants_gpu:
            # NGC images set NVIDIA_VISIBLE_DEVICES=all: keep a CPU cell off the GPUs.
            env.setdefault("NVIDIA_VISIBLE_DEVICES", "void")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        return env


def measure_cap(s: RunSettings) -> float | None:
    """The most seconds a budgeted measured phase runs under `overrun`; None: the agent's."""
    if s.budget_max is not None:
        return s.budget_max
    budget = s.run_budget
    if s.overrun is None or budget is None:
        return None
    return max(budget, (s.overrun - 1) * budget)


def quiet_tunables(given: str | None) -> str:
    """GLIBC_TUNABLES with the tcache off (its freed chunks would fill like a leak)."""
    parts = [p for p in (given or "").split(":") if p]
    if not any(p.startswith(TCACHE + "=") for p in parts):
        parts.append(TCACHE + "=0")
    return ":".join(parts)


TCACHE = "glibc.malloc.tcache_count"
# Seconds of steps timed again under the user's allocator settings (`as_user_s`).
AS_USER_S = 0.5
# The allocator settings, and the variable that hands their own values to the agent.
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


# One line of `harness doctor`: (ok|warn|FAIL, what it found, the fix).
Check = tuple[str, str, str]


@dataclass(frozen=True)
class Capabilities:
    """What one runtime can do, declared by its class: asked, never probed."""

    product: str             # how `harness doctor` names its engine ("Docker", "Podman")
    abilities: Abilities     # the name's entry in `matrixfile.model.ABILITIES`
    queues_cells: bool       # a cluster scheduler decides what runs when
    probes_gpus: bool        # `gpu_inventory` asks an engine of its own (a probe container)
    resolves_days: bool      # resolves an `as_of:` image per day (`harness day` runs on it)
    builds_hybrids: bool     # its engine builds `harness culprit`'s hybrid images offline

    @property
    def gpu_by(self) -> str:
        """How the engine is asked for a GPU (`Abilities.gpu_by`)."""
        return self.abilities.gpu_by


class Runtime(Protocol):
    """A backend that runs cells; it declares what it can do in `capabilities`."""

    name: str
    queues_cells: bool      # a cluster scheduler decides what runs when: submit all at once

    @property
    def capabilities(self) -> Capabilities:
        """What this runtime can do, declared (`Capabilities`): asked, never probed."""

    def abort_prepare(self) -> None:
        """Ctrl-C: stop an image build or venv install in progress, leaving nothing."""

    def gpu_inventory(self, image: str, python: str = "python3") -> HostGpus | None:
        """The GPUs a container of `image` gets on this engine; None: no engine to ask."""

    def setup_checks(self, wants_gpu: bool) -> list[Check]:
        """`harness doctor`: what this machine lacks for this runtime, as `Check`s."""

    def check(self, cells: list[Cell]) -> None:
        """Raise EnvironmentUnavailable if these cells cannot run here at all."""

    def resolve_ahead(self, cells: list[Cell], progress: Progress) -> None:
        """Before the first cell: settle what the images need once (an `as_of:` day)."""

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        """Make the image available (pull / build venv); raise ImageUnavailable."""

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        """Run one cell to completion or deadline; always clean up what it started."""

    def cleanup(self) -> int:
        """Remove anything this or an earlier, crashed harness left behind; count it."""

    def run_warm(self) -> None:
        """Many short cells follow: run each from a warm interpreter where possible."""

    def warm_ahead(self, cell: Cell, scripts: list[Path]) -> None:
        """Start the warm interpreter `cell` would fork from, `scripts` imported, if any."""

    def pins(self, image: ImageSpec) -> tuple[str, ...]:
        """A dated image's requirements as resolved on its day (`harness day`).

        Raises:
            EnvironmentUnavailable: this runtime resolves no day.
        """


class RuntimeBase:
    """A runtime's defaults; subclasses declare their `Capabilities` as class attributes."""

    queues_cells = False
    name: str
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
        """This runtime's entry in `matrixfile.model.ABILITIES`."""
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
        """`harness doctor`: nothing to say by default."""
        return []

    def resolve_ahead(self, cells: list[Cell], progress: Progress) -> None:
        """Nothing to settle before the first cell by default."""


def own_cgroup(runtime: str) -> bool:
    """Whether a cell run by `runtime` ("slurm/<inner>": the inner) had a memory cgroup
    of its own, so its `cgroup` reading is the cell's."""
    name = runtime.rpartition("/")[2]
    return name in ABILITIES and abilities(name).own_cgroup


def cpu_pressure(path: str = "/proc/pressure/cpu") -> dict[str, float]:
    """The host's CPU pressure (Linux PSI), read beside each host-side sample: the "some"
    line's share of time a runnable task waited for a CPU (avg10, percent) and its total
    stall (us), {"psi_some_avg10": ..., "psi_some_total_us": ...}; {} without PSI. It
    says how busy the whole host was, beside the agent's own run-queue delay."""
    try:
        with open(path) as f:
            text = f.read(512)
    except OSError:
        return {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind != "some":
            continue
        fields = dict(p.split("=", 1) for p in rest.split() if "=" in p)
        try:
            return {"psi_some_avg10": float(fields["avg10"]),
                    "psi_some_total_us": float(fields["total"])}
        except (KeyError, ValueError):
            return {}
    return {}


def parse_size(text: str | None) -> int | None:
    if text is None:
        return None
    units = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
    t = text.strip().lower()
    if t[-1] in units:
        return int(t[:-1]) * units[t[-1]]
    return int(t)
