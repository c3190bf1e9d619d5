"""A runtime for unit tests of the orchestrator: writes agent-shaped JSON lines itself.

Each cell's behaviour comes from a function of the cell (leak bytes/iteration, step
time, exit code, crash text...), so tests state the truth and check the verdicts.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agent import fields
from harness.matrixfile.model import Cell, ImageSpec
from harness.runtimes.base import ImageInfo, Progress, RunOutcome, RunRequest, RuntimeBase
from harness.runtimes.local import LocalRuntime, PinsRefused

KNOWN = {"header": set(fields.HEADER), "sample": set(fields.sample_fields()),
         "end": set(fields.END), "where": set(fields.WHERE)}
# Where a fake cell's leak is allocated (its where record under --attribute): a library
# function called from the scenario's line 6; the library's line moves between images.
LEAK_LIB = "/venv/lib/python3.11/site-packages/demo/_impl.py"
LEAK_LINE = 6


@dataclass
class Behaviour:
    leak_per_iter: float = 0.0      # bytes
    step_s: float = 0.001
    own_s: float | None = None     # a measured call's seconds of the cell's own (`cell_s`)
    slowdown_per_iter: float = 0.0  # seconds added per iteration
    exit_code: int = 0
    error: str | None = None        # scenario raises -> end status error
    oom: bool = False
    timed_out: bool = False
    truncate: bool = False          # the agent died mid-write
    base_bytes: float = 200e6
    noise: float = 4096.0
    heap_noise: float = 64.0        # bytes, the heap's jitter
    seed: int = 0
    rq_share: float | None = None   # run-queue delay as a share of step time (busy host)
    cpu_s: float | None = None      # CPU time per step the agent read (the rest: waiting)
    sm_mhz: int | None = None       # the GPU's SM clock the agent read (NVML), per sample
    cgroup_bytes: float | None = None   # the agent's cgroup reading: this plus the cell's rss
    leak_until: int | None = None   # the growth stops after this many calls (a cache filled)
    heap_samples: int | None = None     # the heap is read in the first n samples only
    # The agent's worker processes (`kids`, their USS): none unless set; they grow this
    # many bytes a call, until `kids_until` calls where set (a cache in the worker).
    kids_leak_per_iter: float | None = None
    kids_until: int | None = None
    memory_stop: dict[str, Any] | None = None   # the agent's safety stop, as its end says


@dataclass
class FakeRuntime(RuntimeBase):
    behave: Callable[[Cell], Behaviour]
    name: str = "fake"
    runs: list[str] = field(default_factory=list)
    prepared: list[str] = field(default_factory=list)
    attributed: list[tuple[str, tuple[str, ...], int, int | None]] = field(
        default_factory=list)   # (cell, --attribute kinds, iterations, max_iterations)
    # The header's packages are the image's `pip:` pins (as a venv's would be), so a
    # behaviour can depend on them (harness culprit's hybrids); else {"demo": label}.
    pins_as_packages: bool = False

    def check(self, cells: list[Cell]) -> None:
        return None

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        self.prepared.append(image.label)
        return ImageInfo(ref=image.ref, digest=f"sha256:fake-{image.label}")

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        cell = request.cell
        self.runs.append(cell.id)
        b = self.behave(cell)
        rng = random.Random(f"{b.seed}:{cell.id}:{len(self.runs)}")
        s = cell.settings
        packages = (dict(p.split("==", 1) for p in cell.image.pip)
                    if self.pins_as_packages and cell.image.pip else {"demo": cell.image.label})
        lines: list[dict[str, Any]] = [{"type": "header", "schema": 1, "python": "3.11.7",
                                        "packages": packages, "env": {}}]
        steps = 0
        measured = s.agent_iterations
        if request.attribute and (budget := s.run_budget) is not None:
            # An attributed run's budget ends it, as the agent's does, at its least calls.
            measured = min(measured, max(s.budget_calls or 0, round(budget / b.step_s)))
        for phase, count in (("warmup", s.warmup), ("measure", measured)):
            dts: list[float] = []
            for k in range(count):
                steps += 1
                dts.append(max(1e-6, b.step_s + b.slowdown_per_iter * steps
                               + rng.gauss(0, b.step_s * 0.05)))
                if (k + 1) % s.sample_every == 0 or k + 1 == count:
                    grown = steps if b.leak_until is None else min(steps, b.leak_until)
                    mem = b.base_bytes + b.leak_per_iter * grown
                    noisy = mem + 4096 * round(rng.gauss(0, b.noise) / 4096)
                    rec = {"type": "sample", "src": "step", "phase": phase, "i": steps,
                           "t": steps * b.step_s, "rss": noisy, "uss": noisy - 1e6,
                           "heap": mem / 2 + rng.gauss(0, b.heap_noise),
                           "dt_b64": step_times(dts)}
                    sampled = sum(1 for x in lines if x["type"] == "sample")
                    if b.heap_samples is not None and sampled >= b.heap_samples:
                        del rec["heap"]
                    if b.own_s is not None and phase == "measure":
                        rec["cell_s"] = (k + 1) * b.own_s
                    if b.rq_share is not None:
                        rec["rq_s"] = b.rq_share * sum(dts)
                    if b.cpu_s is not None:
                        rec["cpu_s"] = b.cpu_s * len(dts)
                    if b.sm_mhz is not None:
                        rec["sm_mhz"] = b.sm_mhz
                    if b.cgroup_bytes is not None:
                        rec["cgroup"] = b.cgroup_bytes + noisy
                    if b.kids_leak_per_iter is not None:
                        kept = steps if b.kids_until is None else min(steps, b.kids_until)
                        rec["kids"] = 30e6 + b.kids_leak_per_iter * kept + 4096 * round(
                            rng.gauss(0, b.noise) / 4096)
                    lines.append(rec)
                    dts = []
        if b.error:
            lines.append({"type": "end", "status": "error",
                          "error": {"type": "RuntimeError", "message": b.error,
                                    "traceback": f"Traceback...\nRuntimeError: {b.error}"}})
        elif b.memory_stop is not None:
            lines.append({"type": "end", "status": "ok", "iterations": 0,
                          "memory_stop": b.memory_stop})
        elif not (b.oom or b.timed_out or b.exit_code):
            lines.append({"type": "end", "status": "ok", "iterations": measured})
        if request.attribute and not (b.error or b.oom or b.timed_out or b.exit_code):
            self.attributed.append((cell.id, request.attribute, measured, s.run_budget))
            lines.insert(len(lines) - 1, where_record(cell, request.attribute, measured, b))
        for record in lines:    # what the agent may write, from the one list of names
            assert set(record) <= KNOWN[record["type"]], set(record) - KNOWN[record["type"]]
        text = "".join(json.dumps(x) + "\n" for x in lines)
        if b.truncate:
            text = text[: len(text) * 2 // 3]
        (request.outdir / "samples.jsonl").write_text(text)
        code = 137 if b.oom else (b.exit_code or (1 if b.error else 0))
        return RunOutcome(exit_code=None if b.timed_out else code, timed_out=b.timed_out,
                          oom_killed=b.oom, duration_s=0.01,
                          mem_limit_bytes=1 << 30 if b.oom else None)

    def cleanup(self) -> int:
        return 0


def where_record(cell: Cell, kinds: tuple[str, ...], calls: int, b: Behaviour
                 ) -> dict[str, Any]:
    """The agent's where record for a fake cell: its leak, all of it seen by Python's
    allocator, at the scenario's LEAK_LINE (through LEAK_LIB, at a line of its own per
    image); its slowdown as late stack samples in a growing function."""
    rec: dict[str, Any] = {"type": "where", "kinds": list(kinds), "calls": calls,
                           "frames": 10, "errors": {}}
    scenario = str(cell.scenario.script)
    if "heap" in kinds:
        size = int(b.leak_per_iter * calls)
        frames = [[LEAK_LIB, 100 + cell.image.index, "pop"], [scenario, LEAK_LINE, "step"]]
        rec["heap"] = {"traced_start": 1 << 20, "traced_end": (1 << 20) + size,
                       "peak": (1 << 21) + size, "overhead_s": 0.0,
                       "sites": [{"size": size, "count": calls, "frames": frames}] if size
                       else []}
    if "device" in kinds:
        rec["errors"]["device"] = "RuntimeError: torch is not imported by the scenario"
    if "stack" in kinds:
        late = min(90, int(100 * b.slowdown_per_iter / max(b.step_s, 1e-9) * calls / 4))
        rec["stack"] = {"hz": 200.0, "windows": {"early": {"from": 0, "to": calls // 4,
                                                           "samples": 100},
                                                  "late": {"from": calls - calls // 4,
                                                           "to": calls, "samples": 100}},
                        "sites": [{"frames": [[scenario, 9, "growing"],
                                              [scenario, 3, "step"]], "early": 10,
                                   "late": 10 + late},
                                  {"frames": [[scenario, 7, "fixed"], [scenario, 2, "step"]],
                                   "early": 90, "late": 90 - late}]}
    return rec


class DatedIndex(LocalRuntime):
    """The local runtime over a made-up package index, for the day search and culprit's
    hybrids: `history(day)` is each package's version as a requirement list resolves
    that day; `requires[(name, version)]` the packages that release pins exactly
    ({dep: version}, as pydantic 2.9.2 pins pydantic-core 2.23.4), so the resolver
    refuses pins that hold them apart (`PinsRefused`) and a hybrid goes in --no-deps. No
    venv is built (`built`: each install's pins and whether --no-deps); each cell runs on
    FakeRuntime with its pins (a dated cell's resolved ones) as its packages."""

    def __init__(self, cache: Path, history: Callable[[str], dict[str, str]],
                 behave: Callable[[Cell], Behaviour],
                 requires: dict[tuple[str, str], dict[str, str]] | None = None):
        super().__init__(cache)
        self.history, self.requires = history, dict(requires or {})
        self.fake = FakeRuntime(behave, pins_as_packages=True)
        self.built: list[tuple[tuple[str, ...], bool]] = []

    def resolve_ahead(self, cells: list[Cell], progress: Progress) -> None:
        return None

    def pins(self, image: ImageSpec) -> tuple[str, ...]:
        assert image.as_of is not None
        return tuple(sorted(f"{n}=={v}" for n, v in self.history(image.as_of).items()))

    def refused(self, reqs: list[str]) -> str | None:
        """What the resolver says of pins that break an exact pin, or None."""
        pins = dict(r.split("==", 1) for r in reqs)
        for (name, version), deps in sorted(self.requires.items()):
            for dep, want in sorted(deps.items()):
                if pins.get(name) == version and pins.get(dep) != want:
                    return f"{name}=={version} depends on {dep}=={want}"
        return None

    def _build_into(self, python: str, reqs: list[str], tmp: Path, progress: Progress,
                    label: str, as_of: str | None = None, no_deps: bool = False,
                    *more: Any, **named: Any) -> None:
        said = None if no_deps else self.refused(reqs)
        if said is not None:
            raise PinsRefused(f"uv pip cannot install {' '.join(reqs)}: {said}", said)
        (tmp / "bin").mkdir(parents=True)
        (tmp / "bin" / "python").write_text("")
        self.built.append((tuple(reqs), no_deps))

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        image = request.cell.image
        pip = self.pins(image) if image.as_of else image.pip
        cell = dataclasses.replace(request.cell, image=dataclasses.replace(image, pip=pip))
        return self.fake.run(dataclasses.replace(request, cell=cell), progress)


def step_times(seconds: list[float]) -> str:
    """Step times as the agent writes them (`dt_b64`: little-endian float64 seconds in
    base64, agent.writer.step_times)."""
    return base64.b64encode(struct.pack(f"<{len(seconds)}d", *seconds)).decode("ascii")

