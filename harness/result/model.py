"""`CellResult`: one cell, from agent record to rendered report, as frozen dataclasses, stored
as `cells/<id>/result.json` once final (`result.codec`, `load_result`). Outside free-form
parts are `JSON`, never `Any`. `DerivedFrom`: the run keys an answer came from, so one whose
cell ran again since shows as stale.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.analysis.facts import Facts, device_kind
from harness.analysis.kinds import BAD, GOOD, KINDS, SLOWDOWN, TIMED, Verdict
from harness.analysis.records import (
    Confirmation,
    Explained,
    Finding,
    GpuTime,
    LiveRun,
    MemoryTrend,
    StepTrend,
    VsBaseline,
    human_seconds,
    missed_text,
    rate_text,
    rate_words,
)
from harness.analysis.rules import leaking, shown
from harness.result.codec import JSON, DecodeError, decode, encode
from harness.result.runkey import RunKey

SCHEMA = 3
READS = (1, 2, 3)    # result.json schemas this code reads (3: findings as {kind, text})


@dataclass(frozen=True, slots=True)
class ImagePart:
    """The cell's image: its matrix label and order, and what the engine had."""

    label: str
    index: int
    ref: str = ""
    digest: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    pip: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuPart:
    value: str = ""          # the matrix's selection: "0", "1,2", "all", "none"
    label: str = ""          # "gpu0", "cpu", ...


@dataclass(frozen=True, slots=True)
class ScenarioPart:
    id: str = ""
    script: str = ""         # relative to the matrix file where it can be
    params: dict[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuFact:
    """One GPU of the cell's host, as the engine showed it to a probe container."""

    index: int
    name: str
    uuid: str | None = None
    cc: tuple[int, int] | None = None
    memory_total: int | None = None


@dataclass(frozen=True, slots=True)
class HostPart:
    label: str = ""
    url: str | None = None
    machine: str = ""        # the machine the harness ran on
    gpus: tuple[GpuFact, ...] = ()
    driver: str | None = None
    cuda_driver: str | None = None


@dataclass(frozen=True, slots=True)
class Summary:
    """A run's calls, time per call and peak RSS.

    `median_step_s` is the step's own time per call (wall clock less waits for a CPU),
    the per-call figure every report shows (the --as-user calls' where timed).
    `wall_step_s` is the wall-clock median, `run_step_s` its own time under the run's
    allocator settings."""

    iterations: int = 0
    median_step_s: float | None = None
    peak_rss: float | None = None
    wall_step_s: float | None = None
    run_step_s: float | None = None
    user_calls: int | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the process or container ended (`RunOutcome`, as stored)."""

    exit_code: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    error: str | None = None
    duration_s: float = 0.0
    log_tail: str = ""
    mem_limit_bytes: int | None = None
    details: dict[str, JSON] = field(default_factory=dict)
    host_samples: int = 0    # taken by the runtime (the result keeps the last 2000)


@dataclass(frozen=True, slots=True)
class MemoryStats:
    first: float
    peak: float
    last: float


@dataclass(frozen=True, slots=True)
class Reconcile:
    """The agent's, the engine's and the host NVML's memory figures side by side."""

    sources: dict[str, MemoryStats] = field(default_factory=dict)
    flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What the agent saw inside the image (its header)."""

    python: str | None = None
    implementation: str | None = None
    platform: str | None = None
    hostname: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    gpu: dict[str, JSON] | None = None
    gpu_reason: str | None = None
    heap: JSON = None            # how the agent read the heap (mallinfo2, ...)
    pythonmalloc: str | None = None
    cgroup: str | int | None = None
    cpu_count: int | None = None

    def gpu_names(self) -> list[str]:
        """The GPU names the agent saw, in order."""
        return [str(d["name"]) for d in self.gpu_devices() if d.get("name")]

    def gpu_devices(self) -> list[dict[str, JSON]]:
        devices = (self.gpu or {}).get("devices")
        return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []

    @property
    def gpu_driver(self) -> str | None:
        driver = (self.gpu or {}).get("driver")
        return str(driver) if driver is not None else None


@dataclass(frozen=True, slots=True)
class AgentError:
    type: str = ""
    message: str = ""
    traceback: str = ""
    fault: str = ""     # "scenario": the agent could not call the scenario as written
    call: int | None = None     # the call it failed in (1: the first), where a call failed


@dataclass(frozen=True, slots=True)
class AgentEnd:
    """The agent's end record, as far as the result keeps it."""

    status: str | None = None
    error: AgentError | None = None
    info: dict[str, JSON] | None = None
    phases: dict[str, float] = field(default_factory=dict)
    iterations: int | None = None
    warmup: int | None = None
    stopped_early: bool | None = None
    mode: str | None = None
    elapsed_s: float | None = None
    sampling_s: float | None = None
    output_dropped: int | None = None   # bytes of the scenario's output past the cap
    budget_spent: bool | None = None    # the measured phase ran its whole time budget
    # The agent's safety stop (`agent/watchdog.py`): rss, grew, limit, call, phase, killed
    memory_stop: dict[str, JSON] | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of the cell (an ambiguous one is run again, longer)."""

    verdict: Verdict
    reason: str
    iterations: int
    rerun: str = ""       # the re-run rule that fired after it (`runrules.RERUN_RULES`)
    seconds: float = 0.0  # the run's wall seconds (0: not recorded)


@dataclass(frozen=True, slots=True)
class Timings:
    """Where the cell's time went, seconds (the agent's phases where it reported them)."""

    cell_s: float = 0.0
    prepare_s: float = 0.0
    waited_for_image_s: float = 0.0
    run_s: float = 0.0
    start_and_exit_s: float = 0.0
    analyse_s: float = 0.0
    import_s: float | None = None
    setup_s: float | None = None
    warmup_s: float | None = None
    measure_s: float | None = None
    teardown_s: float | None = None
    script_s: float | None = None


@dataclass(frozen=True, slots=True)
class Unavailable:
    what: str            # "image" or "engine"
    message: str


@dataclass(frozen=True, slots=True)
class CellResult:
    """One cell's result: what ran, its verdict and every number behind it."""

    id: str
    row: str
    verdict: Verdict
    image: ImagePart
    reason: str = ""
    schema: int = SCHEMA
    gpu: GpuPart = field(default_factory=GpuPart)
    scenario: ScenarioPart = field(default_factory=ScenarioPart)
    settings: dict[str, JSON] = field(default_factory=dict)
    runtime: str = ""
    host: HostPart = field(default_factory=HostPart)
    carrier: str | None = None
    findings: tuple[Finding, ...] = ()
    memory: dict[str, MemoryTrend] = field(default_factory=dict)
    steps: StepTrend | None = None
    cpu_steps: StepTrend | None = None
    contention: Explained | None = None
    gpu_time: GpuTime | None = None
    live: LiveRun | None = None
    vs_baseline: VsBaseline | None = None
    summary: Summary = field(default_factory=Summary)
    outcome: Outcome = field(default_factory=Outcome)
    host_samples: tuple[dict[str, JSON], ...] = ()
    reconcile: Reconcile = field(default_factory=Reconcile)
    fingerprint: Fingerprint = field(default_factory=Fingerprint)
    end: AgentEnd = field(default_factory=AgentEnd)
    problems: tuple[str, ...] = ()
    skipped_lines: int = 0
    attempts: tuple[Attempt, ...] = ()
    timings: Timings = field(default_factory=Timings)
    unavailable: Unavailable | None = None
    key: RunKey | None = None      # what the run depended on (None: recorded before keys)
    rule: str = ""                 # the rule that decided (analysis.rules; "": before it)
    facts: Facts | None = None     # what the rules read beside memory (None: before it)

    @property
    def deciding_carrier(self) -> str | None:
        """The carrier the verdict stands on: the recorded one, or a faster-growing
        leaking one as `analysis.rules.leaking` names it from the stored trends."""
        found = [name for name, _ in leaking(self.memory)]
        return found[0] if self.carrier in found else self.carrier

    @property
    def deciding_source(self) -> str | None:
        """The memory source behind the verdict: the deciding carrier's first, else the
        best recorded (heap, USS, RSS)."""
        source = (self.deciding_carrier or "").split("+")[0] or None
        if source in self.memory:
            return source
        return next((s for s in ("heap", "uss", "rss") if s in self.memory), None)

    def to_json(self, host_samples: bool = True) -> dict[str, JSON]:
        """The result.json object (without `host_samples` for results.json)."""
        out = encode(self)
        assert isinstance(out, dict)
        if not host_samples:
            out.pop("host_samples", None)
        return out


REQUIRED = ("id", "row", "verdict", "image", "image.label", "image.index")


@dataclass(frozen=True, slots=True)
class Planned:
    """A cell the sweep set out to run (its results directory's plan.json): a report
    names the planned cells the directory lacks."""

    id: str
    row: str
    image: str
    index: int


def image_places(results: Mapping[str, CellResult], planned: Sequence[Planned]
                 ) -> dict[str, int]:
    """Each image's place in the matrix: the plan's, else its results' (a --resume may
    reuse a cell from a matrix whose images have since moved)."""
    places = {p.image: p.index for p in planned}
    for r in results.values():
        places.setdefault(r.image.label, r.image.index)
    return places


@dataclass(frozen=True, slots=True)
class Plan:
    """plan.json: what made the results directory (its kind, when, from which matrix)
    and every cell a sweep set out to run, written before the first one runs."""

    cells: tuple[Planned, ...] = ()
    matrix: str = ""             # the matrix file as the sweep was given it
    schema: int = 1
    kind: str = "sweep"          # harness.store.runs.KINDS; a plan.json without one: sweep
    started: float | None = None  # time.time() when the command that wrote it started
    name: str = ""               # the matrix's `name:`
    resumed: float | None = None  # time.time() when `--resume` last continued it


def load_result(data: object, where: str = "result") -> CellResult:
    """A CellResult from a parsed result.json object of schema 1, 2 or 3.

    Raises:
        DecodeError: not a result, an unknown schema, or a value of the wrong type.
    """
    if not isinstance(data, dict):
        raise DecodeError("", f"{where}: not a JSON object")
    schema = data.get("schema", 1)
    if schema not in READS:
        raise DecodeError("schema", f"{where}: schema {schema!r} is not one this harness "
                                    f"reads ({', '.join(map(str, READS))}): update harness")
    # Schema 1's extra keys decode as they are or are ignored.
    current: dict[str, object] = {str(k): v for k, v in data.items()}
    current["schema"] = SCHEMA
    return decode(CellResult, current, required=REQUIRED, parsed=True)


def cell_numbers(res: CellResult) -> str:
    """A cell's key numbers, what decided its verdict (its kind's `figure`) first, then
    median time per call."""
    lead_with = KINDS[res.verdict].figure
    memory: list[str] = []
    grown = carrier_words(res)
    if grown is not None and lead_with != "steps":
        memory.append(grown)
        missed = missed_words(res)
        if missed:
            memory.append(missed)
    step = res.summary.median_step_s
    # Beside the rounds' step times, the run's median is marked as one run's (another
    # time, another load) so the two are not read as one ratio.
    own = " in its own run" if rounds_steps(res) is not None else ""
    per_call = [f"{human_seconds(step)}/call{own}"] if step is not None else []
    lead: list[str] = []
    if res.facts is not None and res.facts.runaway:
        lead.append("memory past the safety stop's limit")
    if lead_with == "steps" and res.steps is not None:
        lead.append(f"late steps {res.steps.ratio:.2f}x early")
    slowed = also_slowed(res)
    if slowed is not None:     # a confirmed slowdown within the run is never hidden
        memory.append(f"late steps {slowed.ratio:.2f}x early")
    versus = baseline_numbers(res)
    if lead_with == "baseline":
        return ", ".join([*versus, *lead, *memory, *per_call])
    return ", ".join([*lead, *memory, *per_call, *versus])


def carrier_words(res: CellResult) -> str | None:
    """The deciding carrier's growth per call: "gpu +1024.0 KiB/call" (None without a
    memory source)."""
    source = res.deciding_source
    if source is None:
        return None
    trend = res.memory[source]
    # The carrier's name as the reason says it ("uss+rss", whose figure is USS's).
    carrier = res.deciding_carrier
    name = shown(carrier if carrier and carrier.split("+")[0] == source else source)
    if trend.kind == "insufficient":
        return f"{name} no readings"     # too few to fit: never "+0.0"
    if KINDS[res.verdict].figure == "memory" and res.verdict in BAD:
        return f"{name} {rate_words(trend.slope)}"   # never "+0.0 KiB/call"
    return f"{name} {rate_text(trend.slope)}"


def missed_words(res: CellResult) -> str:
    """An `ok` or `plateau` cell's bound: "no leak above 40 B/call in 1,000 calls" (the
    smallest steady leak its run could have missed; "" for other kinds or old results)."""
    rate = missed_rate(res)
    return missed_text(rate, res.summary.iterations) if rate is not None else ""


def missed_rate(res: CellResult) -> float | None:
    """`missed_words`' bound in bytes per call (None for other kinds or old results)."""
    if res.verdict not in GOOD:
        return None
    rates = [r for s, t in res.memory.items() if s in ("heap", "uss", "rss")
             and (r := t.missed) is not None and math.isfinite(r)]
    return min(rates) if rates else None


def also_slowed(res: CellResult) -> StepTrend | None:
    """The step trend of a cell bad for another reason (a leak) whose steps also
    slowed within its run, said beside the verdict."""
    if res.verdict == SLOWDOWN or res.verdict not in BAD or res.steps is None:
        return None
    if not res.steps.slowdown or not any(f.kind == SLOWDOWN for f in res.findings):
        return None
    return res.steps


def also_slower(res: CellResult) -> Confirmation | None:
    """The rounds that confirmed a cell bad for another reason (a leak) also slower
    than its baseline; None otherwise (a pooled ratio alone is never said)."""
    vs = res.vs_baseline
    conf = vs.confirmation if vs is not None else None
    if res.verdict not in BAD or res.verdict in TIMED or conf is None:
        return None
    return conf if conf.confirmed and conf.direction == "slower" else None


def baseline_numbers(res: CellResult) -> list[str]:
    """The ratios against the row's baseline with intervals; unconfirmed ones are
    marked, and left out beside a bad verdict."""
    vs = res.vs_baseline
    if vs is None:
        return []
    parts: list[str] = []
    conf, steps, peak = vs.confirmation, vs.steps, vs.peak_rss
    direction = vs.said_direction
    if conf is not None and direction not in (None, "~"):
        steps_in = rounds_steps(res)
        said = (f": {human_seconds(steps_in[0])} -> {human_seconds(steps_in[1])}/call"
                if steps_in is not None else "")
        parts.append(f"time {conf.interval()} baseline ({direction} in "
                     f"{len(conf.decided_by)} interleaved rounds{said})")
    elif steps is not None and direction not in (None, "~") and (
            res.verdict not in BAD or KINDS[res.verdict].figure == "baseline"):
        # Autocorrelated steps make any pooled drift look certain: never said as found.
        parts.append(f"time {steps.ratio:.2f}x baseline (pooled, p={steps.p_value:.2g}; "
                     "unconfirmed)")
    if peak is not None and peak.direction != "~":
        parts.append(f"peak RSS {peak.ratio:.2f}x baseline")
    return parts


def rounds_steps(res: CellResult) -> tuple[float, float] | None:
    """(baseline, this cell) geometric-mean step time in the deciding interleaved
    rounds, whose ratio is the rounds' ratio; None where no rounds decided."""
    vs = res.vs_baseline
    conf = vs.confirmation if vs is not None else None
    if conf is None or vs is None or vs.said_direction in (None, "~"):
        return None
    used = [r for r in conf.rounds if r.index in conf.decided_by and r.base_s > 0
            and r.other_s > 0]
    if not used:
        return None
    return (math.exp(sum(math.log(r.base_s) for r in used) / len(used)),
            math.exp(sum(math.log(r.other_s) for r in used) / len(used)))


def ran_on_cpu(res: CellResult) -> bool:
    """A GPU cell whose framework ran on the CPU (`no-gpu` finding): its verdict is
    about the CPU. The device is re-read, as older results mis-flagged "cuda"."""
    info = res.end.info or {}
    device = info.get("device")
    return (device is not None and device_kind(str(device)) == "cpu"
            and any(f.kind == "no-gpu" for f in res.findings))


def cell_text(res: CellResult, numbers: str | None = None) -> str:
    """'leak: heap +5.9 KiB/call, 15.9 µs/call'; 'ok (ran on CPU): ...' for a GPU cell
    measured on the CPU. `numbers`: its `cell_numbers`, where the caller has them."""
    numbers = cell_numbers(res) if numbers is None else numbers
    verdict = f"{res.verdict} (ran on CPU)" if ran_on_cpu(res) else str(res.verdict)
    return f"{verdict}: {numbers}" if numbers else verdict


def key_digest(result: CellResult) -> str:
    """The cell's run key as a short digest (verdict and reason for a result from
    before keys)."""
    said: JSON = (encode(result.key) if result.key is not None
                  else {"before keys": [result.verdict, result.reason]})
    text = json.dumps(said, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class DerivedFrom:
    """Cell id -> the digest of the run key the answer was made from."""

    keys: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Mapping[str, CellResult], cells: Iterable[str | None]
           ) -> DerivedFrom:
        """The answer rests on `cells` as `results` hold them now."""
        return cls({cid: key_digest(results[cid]) for cid in cells
                    if cid is not None and cid in results})

    def changed(self, results: Mapping[str, CellResult]) -> list[str]:
        """The cells the answer rests on that are missing or ran again since."""
        return sorted(cid for cid, digest in self.keys.items()
                      if cid not in results or key_digest(results[cid]) != digest)

    def to_json(self) -> dict[str, JSON]:
        return {cid: digest for cid, digest in sorted(self.keys.items())}

    @classmethod
    def from_json(cls, data: object) -> DerivedFrom | None:
        """None where nothing was recorded (an answer written before provenance)."""
        if not isinstance(data, dict) or not data:
            return None
        return cls({str(k): str(v) for k, v in data.items()})
