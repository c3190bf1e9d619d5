"""The validated, frozen matrix model and the Cells it expands to."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol, get_args

from harness.thresholds import AnalysisConfig

# The one list of runtime names, for `runtime:`, --runtime, `FACTORIES` and `ABILITIES`.
RuntimeName = Literal["docker", "local", "podman"]
RUNTIMES: tuple[str, ...] = get_args(RuntimeName)
DEFAULT_RUNTIME = "docker"      # a matrix without `runtime:`


@dataclass(frozen=True)
class Abilities:
    """What a runtime can do, declared once per name: code outside harness/runtimes/ asks
    these, never the runtime's name."""

    container_images: bool      # an image is a container reference (else an interpreter)
    pulls_images: bool          # a missing image is pulled from its registry
    own_cgroup: bool            # a memory cgroup per cell: `mem_limit` applies
    serves_hosts: bool          # `hosts:` endpoints (Docker API URLs) run cells
    gpu_by: Literal["device-request", "cdi", "visible-devices"]     # how a cell gets GPU N
    adds_tools: bool            # can add an attribution tool (memray) to a `pip:` venv
    command: str | None         # the engine's command line, for a reproducer; None: none


ABILITIES: Mapping[str, Abilities] = MappingProxyType({
    "docker": Abilities(container_images=True, pulls_images=True, own_cgroup=True,
                        serves_hosts=True, gpu_by="device-request", adds_tools=False,
                        command="docker"),
    "local": Abilities(container_images=False, pulls_images=False, own_cgroup=False,
                       serves_hosts=False, gpu_by="visible-devices", adds_tools=True,
                       command=None),
    "podman": Abilities(container_images=True, pulls_images=True, own_cgroup=True,
                        serves_hosts=False, gpu_by="cdi", adds_tools=False,
                        command="podman"),
})


def abilities(runtime: str) -> Abilities:
    """The abilities of `runtime` as a result records it (`slurm/docker` is docker's); an
    unknown name reads as the default runtime's."""
    name = runtime.rpartition("/")[2]
    return ABILITIES.get(name, ABILITIES[DEFAULT_RUNTIME])


# `heap:` quiet (default): tcache off, PYTHONMALLOC=malloc, gc before each heap reading;
# stock: the heap as the scenario leaves it.
HeapMode = Literal["quiet", "stock"]
HEAP_MODES: tuple[str, ...] = get_args(HeapMode)


@dataclass(frozen=True)
class RunSettings:
    """How one cell runs. Set in `defaults:` and overridable per scenario."""

    iterations: int = 2000
    warmup: int = 200
    sample_every: int = 10
    sample_interval: float = 0.5    # seconds between timer-thread samples
    timeout: float = 1200.0         # seconds, whole cell, enforced by the harness
    mem_limit: str | None = None    # e.g. "2g"; docker only
    pythonmalloc: bool = True       # run with PYTHONMALLOC=malloc so the heap signal is clean
    heap: HeapMode = "quiet"        # quiet: tcache off, gc.collect() before heap reads
    repeats: int = 2                # extra runs of an ambiguous cell
    rounds: int = 3                 # interleaved B S rounds confirming a vs-baseline change
    network: bool = False           # docker: network off unless asked
    shm_size: str = "1g"
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Early stop (max_iterations or budget): stop once the verdict is certain, after
    # min_iterations, else at the budget (BUDGET_MIN_CALLS at least) or max_iterations.
    min_iterations: int = 50
    max_iterations: int | None = None
    budget: float | None = None     # seconds of measuring; None: DEFAULT_BUDGET_S
    # The fields below have no matrix key; harness, harness.check or the plugin set them.
    # A budget's least calls (None: BUDGET_MIN_CALLS); raised for a rerun after `short`.
    budget_calls: int | None = None
    # The most a cell takes in all, in budgets (>= 2), warm-up and reruns included
    # (None: only `timeout` bounds it).
    overrun: int | None = None
    # The warm-up's most share of a budget (None: warm-up runs before the budget).
    warmup_share: float | None = None
    # The most seconds an attempt's measured phase runs, from `overrun`, for a rerun.
    budget_max: float | None = None
    # `--iterations N`: the most calls any run of the cell makes, reruns included.
    asked_calls: int | None = None
    # Time alone (confirmation rounds): no heap readings, whose malloc_trim skews time.
    time_only: bool = False

    @property
    def agent_iterations(self) -> int:
        return self.max_iterations if self.max_iterations is not None else self.iterations

    @property
    def run_budget(self) -> float | None:
        """The measured phase's budget in seconds; None for a fixed `iterations`."""
        if self.max_iterations is None:
            return None
        return self.budget if self.budget is not None else DEFAULT_BUDGET_S


# A run's length is time, not calls: users wait in seconds, and a cheap step needs many
# calls for a cache to show it stops. `budget:` alone caps calls at BUDGET_CAP.
DEFAULT_BUDGET_S = 5.0
BUDGET_MIN_CALLS = 300     # 30 readings at `sample_every` 10: a trend, and step windows
BUDGET_CAP = 1_000_000


@dataclass(frozen=True)
class ImageSpec:
    """An image: a Docker reference, or for the local runtime a Python environment."""

    label: str                      # short, unique, used in cell ids and table columns
    ref: str                        # docker reference, or interpreter for local
    index: int                      # position in the matrix = version order
    pip: tuple[str, ...] = ()       # local runtime: requirements built into a cached venv
    python: str | None = None       # interpreter inside the image / for the venv
    as_of: str | None = None        # local runtime: `pip` resolved as of this day (YYYY-MM-DD)
    # local runtime, from `lock:`: (pin, its hashes), for --require-hashes
    hashes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    lock: str | None = None         # local runtime: the `lock:` file of `pip`, its path
    # local runtime: a culprit hybrid, `pip` installed as listed (--no-deps if needed)
    hybrid: bool = False


@dataclass(frozen=True)
class ScenarioSpec:
    id: str
    script: Path                    # absolute
    params: Mapping[str, Any]
    settings: RunSettings


@dataclass(frozen=True)
class GpuSel:
    """`0`, a UUID, "all" or "none"."""

    value: str

    @property
    def label(self) -> str:
        if self.value == "none":
            return "cpu"
        if self.value == "all":
            return "gpuall"
        if self.value.isdigit():
            return f"gpu{self.value}"
        return "gpu-" + self.value.removeprefix("GPU-")[:8]

    @property
    def wants_gpu(self) -> bool:
        return self.value != "none"


def is_local_endpoint(url: str | None) -> bool:
    """The default engine or a unix socket: one that sees our files and GPUs."""
    return url is None or url.startswith("unix://")


@dataclass(frozen=True)
class Host:
    """A Docker endpoint (unix://, tcp://, ssh://user@host) or a docker context name."""

    label: str
    url: str | None                 # None: the default engine (DOCKER_HOST / local socket)

    @property
    def is_local(self) -> bool:
        return is_local_endpoint(self.url)


LOCAL_HOST = Host("local", None)


@dataclass(frozen=True)
class Cell:
    id: str
    image: ImageSpec
    gpu: GpuSel
    scenario: ScenarioSpec
    host: Host = LOCAL_HOST

    @property
    def row(self) -> str:
        """(host x) GPU x scenario: the row of the comparison table."""
        base = f"{self.gpu.label}.{self.scenario.id}"
        return base if self.host is LOCAL_HOST else f"{self.host.label}.{base}"

    @property
    def lane(self) -> tuple[str, str]:
        """Cells sharing a lane run one at a time: one per GPU per host."""
        return (self.host.label, self.gpu.value)

    @property
    def settings(self) -> RunSettings:
        return self.scenario.settings

    def with_settings(self, settings: RunSettings) -> Cell:
        """This cell run with other settings (shorter, longer, capped): the same id."""
        return replace(self, scenario=replace(self.scenario, settings=settings))


@dataclass(frozen=True)
class SlurmSpec:
    """`slurm:` in the matrix: every cell becomes one job of the cluster's scheduler."""

    partition: str | None = None
    account: str | None = None
    time: float | None = None       # seconds; None: the cell's timeout plus a margin
    gpu_type: str | None = None     # --gres=gpu:TYPE:N
    gpus_per_node: int | None = None  # what `gpu: all` asks for
    mem: str | None = None          # --mem; None: the cell's mem_limit plus headroom
    options: tuple[str, ...] = ()   # extra sbatch options, e.g. --qos=high
    pyxis: bool = False             # docker images through `srun --container-image`


@dataclass(frozen=True)
class FitSpec:
    """`fit:` in the matrix: `harness fit` finds the largest `param` in lo..hi that runs."""

    param: str
    lo: int
    hi: int


@dataclass(frozen=True)
class Matrix:
    name: str
    file: Path
    runtime: RuntimeName
    images: tuple[ImageSpec, ...]
    gpus: tuple[GpuSel, ...]
    scenarios: tuple[ScenarioSpec, ...]
    cells: tuple[Cell, ...]
    baseline: str | None            # image label
    analysis: AnalysisConfig
    max_parallel: int | None = None
    fail_fast: bool = False
    hosts: tuple[Host, ...] = (LOCAL_HOST,)
    slurm: SlurmSpec | None = None
    fit: FitSpec | None = None


class _Image(Protocol):
    @property
    def label(self) -> str: ...

    @property
    def index(self) -> int: ...


class InRow(Protocol):
    """A cell as the sweep plans it (`Cell`) or as it ended (`CellResult`)."""

    @property
    def id(self) -> str: ...

    @property
    def row(self) -> str: ...

    @property
    def image(self) -> _Image: ...


def row_baselines(cells: Iterable[InRow], baseline: str | None) -> dict[str, str]:
    """Cell id -> its row baseline's id: the image labelled `baseline`, else the row's
    first (the sweep and a re-analysis pick the same)."""
    rows: dict[str, list[InRow]] = {}
    for c in cells:
        rows.setdefault(c.row, []).append(c)
    out: dict[str, str] = {}
    for row_cells in rows.values():
        row_cells.sort(key=lambda c: c.image.index)
        base = next((c for c in row_cells if c.image.label == baseline), row_cells[0])
        out.update({c.id: base.id for c in row_cells})
    return out

