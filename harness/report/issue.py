"""A bug report draft for the upstream tracker, for one row (`harness report DIR --issue
ROW`): system information, the scenario, the numbers, both environments exactly, and the
`--find-cause` and `harness culprit` answers as written. Environments are the pins each
cell found installed, never a `pip:` image's unpinned list, which installs today's releases.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np
import yaml

from harness.analysis.kinds import STALE, TIMED, kind
from harness.analysis.records import kib, per_call, rate_text, scaled
from harness.answers.search import FRAMEWORKS, TOOLING, RowAnswer
from harness.errors import InputError
from harness.matrixfile.model import BUDGET_CAP, DEFAULT_BUDGET_S, abilities
from harness.report.model import Report, Reporter, md, steps_vs_baseline
from harness.result.codec import JSON
from harness.result.model import CellResult, also_slowed, also_slower
from harness.runtimes.base import own_cgroup
from harness.runtimes.resolver import flags
from harness.store.gate import rerun_line
from harness.thresholds import AnalysisConfig

if TYPE_CHECKING:
    import numpy.typing as npt


Result = CellResult
BOOTSTRAP = 2000
MAX_STEPS = 4000          # per cell, evenly strided: the interval does not need them all


def ratio_ci(base: npt.NDArray[np.float64], other: npt.NDArray[np.float64],
             level: float = 0.95, seed: int = 0
             ) -> tuple[float, float, float]:
    """median(other)/median(base) with a percentile bootstrap interval (deterministic)."""
    rng = np.random.default_rng(seed)
    a = base[:: max(1, len(base) // MAX_STEPS)]
    b = other[:: max(1, len(other) // MAX_STEPS)]
    ma = np.median(rng.choice(a, (BOOTSTRAP, len(a))), axis=1)
    mb = np.median(rng.choice(b, (BOOTSTRAP, len(b))), axis=1)
    ratios = mb / ma
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(other) / np.median(base)), float(lo), float(hi)


def scenario_text(report: Report, res: Result) -> tuple[str, str]:
    """(path shown, script text) of a cell's scenario; the text says so if not found."""
    script = res.scenario.script
    if not script:
        return "", "(the result does not name its scenario script)"
    # Stored relative to the matrix file, not the current directory.
    tries: list[Path] = []
    matrix = report.meta.get("matrix")
    if Path(script).is_absolute():
        tries.append(Path(script))
    elif isinstance(matrix, str) and matrix:
        tries.append(Path(matrix).parent / script)
    if report.root is not None and not Path(script).is_absolute():
        tries.append(report.root / script)
    for path in tries:
        if path.is_file():
            return script, path.read_text(encoding="utf-8", errors="replace")
    return script, ("(script not found; looked at " + ", ".join(map(str, tries)) +
                    "; paste it here)")


def plain(value: JSON) -> str:
    """A JSON value as words, not a Python repr: {"func": "mallinfo2"} -> "func mallinfo2"."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {plain(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(plain(v) for v in value)
    return "-" if value is None else str(value)


def system_lines(res: Result, changed: list[tuple[str, str, str]] | None = None) -> list[str]:
    fp = res.fingerprint
    env = fp.env
    frameworks = [f"{n} {v}" for n, v in sorted(fp.packages.items())
                  if n.startswith(FRAMEWORKS)]
    # The packages that differ from the last good image say more than a framework list.
    moved = [f"{what.removeprefix('pip ')} {a} -> {b}" for what, a, b in changed or []
             if what.startswith("pip ")]
    packages = ([f"- Packages that changed: {', '.join(moved)}"] if moved else []) + (
        [f"- Framework: {', '.join(frameworks)}"] if frameworks else [])
    if not packages:
        packages = ["- Packages: " + (", ".join(f"{n} {v}" for n, v in
                                              sorted(fp.packages.items())[:8]) or "-")]

    def cc(d: dict[str, JSON]) -> str:
        value = d.get("cc")
        return ".".join(map(str, value)) if isinstance(value, list) else ""

    devices = [f"{d.get('name')} (compute capability {cc(d)})" for d in fp.gpu_devices()]
    return [*packages,
            f"- CUDA: {env.get('CUDA_VERSION', '-')}, cuDNN: {env.get('CUDNN_VERSION', '-')}, "
            f"NCCL: {env.get('NCCL_VERSION', '-')}",
            f"- GPU: {', '.join(devices) or fp.gpu_reason or 'none recorded'}",
            f"- NVIDIA driver: {fp.gpu_driver or '-'}",
            f"- Image: `{res.image.ref}` (digest `{res.image.digest or '-'}`)",
            f"- Python: {fp.python or '-'}; OS: {fp.platform or '-'}",
            f"- Runtime: {res.runtime or '-'}; heap reading: {plain(fp.heap)}"]


def measured_lines(report: Report, good: Result | None, bad: Result) -> list[str]:
    """Growth and slowdown of the first bad cell, with intervals, vs the last good."""
    lines = ["| | " + (f"last good ({md(good.image.label)}) | " if good else "") +
             f"first bad ({md(bad.image.label)}) |",
             "|---|" + ("---|" if good else "") + "---|"]
    cells = [c for c in (good, bad) if c is not None]

    def row(name: str, value: Callable[[Result], str]) -> None:
        lines.append(f"| {name} | " + " | ".join(md(value(c)) for c in cells) + " |")

    row("verdict", lambda c: f"{c.verdict}: {c.reason}")
    # The cgroup reading is the cell's only where its runtime gave it its own cgroup.
    sources = sorted({s for c in cells for s in c.memory
                      if s != "cgroup" or own_cgroup(c.runtime)})
    for s in sources:
        def growth(c: Result, s: str = s) -> str:
            t = c.memory.get(s)
            if t is None:
                return "-"
            if t.kind == "insufficient":
                return f"no readings to fit ({t.n} samples)"
            _, scale = per_call(t.slope)
            return (f"{rate_text(t.slope, 2)} (CI {scaled(t.slope_lo, scale, 2)}.."
                    f"{scaled(t.slope_hi, scale, 2)}), {kib(t.growth / 1024, 2)} MiB "
                    f"over {t.n} samples, {t.kind}")
        row(f"{s} growth", growth)

    def trend(c: Result) -> str:
        st = c.steps
        return (f"median {st.median_s * 1e3:.4g} ms; late/early {st.ratio:.2f}x "
                f"(p={st.p_value:.2g})") if st is not None else "-"
    row("step time", trend)
    out = lines
    sa = report.series(good.id) if good is not None else None
    sb = report.series(bad.id)
    if sa is not None and sb is not None:
        ga, gb = sa.cols.steps, sb.cols.steps

        if len(ga) and len(gb) and np.median(ga) > 0 and timed(bad):
            ratio, lo, hi = ratio_ci(ga, gb)
            out.append(f"\nStep time, first bad vs last good: {ratio:.2f}x (95% bootstrap CI "
                       f"{lo:.2f}..{hi:.2f}, {len(ga)} and {len(gb)} steps), pooled: the two "
                       "runs ran one after the other, so the host's drift is in the ratio "
                       "and not in the interval; only interleaved rounds confirm a change.")
    out.append(f"\nSlope intervals (CI) are at {AnalysisConfig().confidence:.0%} confidence; "
               "growth is the slope times the measured span of iterations.")
    vs = bad.vs_baseline
    if vs is not None and vs.steps is not None and timed(bad):
        out.append(f"\nStep time against the baseline {md(vs.baseline)}: "
                   f"{md(steps_vs_baseline(vs))}.")
        if vs.confirmation is not None:
            out.append(f"Interleaved baseline/suspect rounds: {md(vs.confirmation.reason)}.")
    return out


def timed(bad: Result) -> bool:
    """Whether the first bad cell's finding is about time (then step ratios belong in it)."""
    return (bad.verdict in TIMED or also_slowed(bad) is not None
            or also_slower(bad) is not None)


def cause_section(r: Report, row: str) -> str:
    """`## Cause`: the row's current `--find-cause` and `harness culprit` answers, quoted."""
    cause, culprit = r.causes.get(row), r.culprits.get(row)
    if cause is None and culprit is None:
        return ""
    out = ["", "## Cause", ""]
    if cause is not None and cause.stale:
        out += [f"The `--find-cause` answer is left out: {md(cause.summary)}", ""]
    elif cause is not None:
        out += ["`harness sweep --find-cause` found (quoted):", "", f"> {md(cause.summary)}",
                ""]
        if cause.steps:
            out += ["How it was found:", "", *(f"- {md(t)}" for t in cause.steps), ""]
    if culprit is not None and culprit.status == STALE:
        out += [f"The `harness culprit` answer is left out: {md(culprit.sentence)}", ""]
    elif culprit is not None:
        out += ["The change that did it, `harness culprit` (quoted):", "",
                f"> {md(culprit.sentence)}", ""]
        if culprit.probes:
            out += ["Probes (hybrid images):", "",
                    *(f"- {md(t)}" for t in culprit.lines()[1:]), ""]
    return "\n".join(out[:-1]) + "\n"


class IssueReporter(Reporter):
    """Markdown for a new issue about one row's first bad image."""

    def __init__(self, report: Report, row: RowAnswer | None = None):
        super().__init__(report)
        self._row = row

    @property
    def row(self) -> RowAnswer:
        if self._row is None:
            raise InputError("an issue draft is about one row: pass --issue ROW")
        return self._row

    @classmethod
    def from_results(cls, report: Report, row: str | None = None) -> IssueReporter:
        """The reporter for `row` (e.g. "gpu0.rfft_loop").

        Raises:
            InputError: no row given, no such row, or the row has no bad cell.
        """
        rows = {r.row: r for r in report.rows}
        if row is None:
            raise InputError("an issue draft is about one row: pass --issue ROW "
                             f"(allowed values: {', '.join(sorted(rows))})")
        if row not in rows and row in report.results:     # a cell id names its row
            row = report.results[row].row
        if row not in rows:
            raise InputError(f"--issue {row}: no such row (allowed values: "
                             f"{', '.join(sorted(rows))})")
        if rows[row].scenario_error is not None:
            raise InputError(f"--issue {row}: {rows[row].sentence}; there is no image to "
                             "report")
        gone = set(report.missing_cells)
        if rows[row].first_bad is None and any(cid in gone for _, _, cid in rows[row].cells):
            fix = rerun_line(report.root) if report.root is not None else "harness sweep " \
                "MATRIX --resume DIR"
            raise InputError(f"--issue {row}: {rows[row].sentence}: no first bad is named "
                             "across a cell that is unreadable, stale or not run\n  fix: "
                             f"{fix} runs them again, then --issue {row}")
        if rows[row].first_bad is None:
            raise InputError(f"--issue {row}: the row has no bad cell, so there is nothing "
                             "to report; pick a row whose first bad is named")
        return cls(report, rows[row])

    def render(self, out: TextIO) -> None:
        r, row = self.report, self.row
        by_label = {label: r.results[cid] for label, _, cid in row.cells
                    if cid in r.results}
        bad = by_label[str(row.first_bad)]
        good = by_label.get(str(row.last_good)) if row.last_good else None
        verb = kind(bad.verdict).title
        slowed = also_slowed(bad)
        if slowed is not None:
            verb += f" and {kind('slowdown').title} (late steps {slowed.ratio:.2f}x early)"
        slower, vs = also_slower(bad), bad.vs_baseline
        if slower is not None and vs is not None:
            verb += (f" and is {slower.ratio:.2f}x slower than {vs.baseline} (in "
                     f"{len(slower.decided_by)} interleaved rounds)")
        scen = bad.scenario
        since = f" (not in {good.image.label})" if good else ""
        out.write(f"# {scen.id} {verb} in {bad.image.label}{since}\n\n")
        out.write("## System information\n\n" + "\n".join(system_lines(bad, row.diff))
                  + "\n\n")
        path, text = scenario_text(r, bad)
        fence = "````" if "```" in text else "```"
        params = scen.params
        said = (f"params `{json.dumps(params, sort_keys=True)}`" if params else "no params")
        out.write(f"## Minimal scenario\n\n`{path}` with {said}, {run_words(bad)}; "
                  "the harness calls `setup(params)` "
                  f"once and `step(state)` per iteration.\n\n{fence}python\n{text.rstrip()}\n"
                  f"{fence}\n\n")
        out.write("## Exact environments\n\n" + "\n".join(environment_lines(good, bad))
                  + "\n\n")
        out.write(reproducer(bad, path, good, time=timed(bad),
                             memory=bad.verdict not in TIMED))
        out.write("## Reproduce with harness\n\n`repro.yaml`, with the scenario file beside "
                  "it, runs the " + ("two environments" if good is not None else
                                     "environment") + " as they ran:\n\n```yaml\n"
                  + repro_matrix(good, bad, path) + "```\n\n```sh\nharness sweep repro.yaml"
                  "\n```\n\n")
        last = f"last good: {good.image.label}" if good else "no good image before it"
        out.write(f"## Versions\n\nFirst bad: {bad.image.label} ({last}); images in "
                  f"order: {', '.join(f'{lb} ({v})' for lb, v, _ in row.cells)}.\n")
        if not row.contiguous:
            out.write("\nThe bad cells are not contiguous (flaky, or fixed and broken "
                      "again).\n")
        out.write("\n## Measured\n\n" + "\n".join(measured_lines(r, good, bad)) + "\n")
        if row.diff:
            out.write("\n## What changed between the two images\n\n| changed | last good | "
                      "first bad |\n|---|---|---|\n")
            for what, a, b in row.diff:
                out.write(f"| {md(what)} | {md(a)} | {md(b)} |\n")
        out.write(cause_section(r, row.row))
        found = r.where_lines(bad.id)
        if found:
            ex = r.explained[bad.id]
            out.write(f"\n## Where\n\nBoth cells run again with attribution ({', '.join(ex.kinds)}"
                      f"; {ex.calls} calls; these runs decide nothing):\n\n")
            for text in found:
                out.write(f"- {md(text)}\n")
        out.write(f"\nMeasured with harness; cell ids {good.id if good else '-'} and "
                  f"{bad.id}.\n")


def exact_pins(res: Result) -> tuple[str, ...]:
    """A `pip:` image's `name==X.Y.Z` pins: as installed, else resolved, else required."""
    if not res.image.pip:
        return ()
    resolved = res.image.labels.get("pins", "").split()
    asked = {p.split("==", 1)[0].split("[", 1)[0].strip().lower().replace("_", "-")
             for p in (*res.image.pip, *resolved)}
    found = {n: v for n, v in res.fingerprint.packages.items()
             if n not in TOOLING or n in asked}
    if found:
        return tuple(f"{n}=={v}" for n, v in sorted(found.items()))
    return tuple(resolved) or tuple(res.image.pip)


def interpreter(res: Result) -> str:
    """`python3.12` for a cell whose agent ran on Python 3.12.x, else `python3`."""
    version = (res.fingerprint.python or "").split(".")
    return f"python{version[0]}.{version[1]}" if len(version) >= 2 and all(
        v.isdigit() for v in version[:2]) else "python3"


def as_of_words(res: Result) -> str | None:
    """"2025-07-15 (00:00 UTC), resolved by `uv pip compile ...`" for a dated image, else None."""
    labels = res.image.labels
    day = labels.get("as_of")
    if not day:
        return None

    how = (f"`{labels['resolved_with']}`" if labels.get("resolved_with") else
           f"`{flags(day)}` (uv; with pip: `{flags(day, 'pip')}`)")
    return f"{day} (00:00 UTC), resolved by {how}"


def environment_lines(good: Result | None, bad: Result) -> list[str]:
    """Each side's environment exactly: image, requirements, day, Python, pins."""
    cells = [(f"last good ({md(good.image.label)})", good)] if good is not None else []
    cells.append((f"first bad ({md(bad.image.label)})", bad))
    lines = ["| | " + " | ".join(h for h, _ in cells) + " |",
             "|---|" + "---|" * len(cells)]

    def row(name: str, value: Callable[[Result], str]) -> None:
        lines.append(f"| {name} | " + " | ".join(md(value(c)) for _, c in cells) + " |")

    row("image", lambda c: (c.image.digest or "-") if c.image.pip else
        f"{c.image.ref} (digest {c.image.digest or '-'})")
    if any(c.image.pip for _, c in cells):
        row("requirements (`pip:`)", lambda c: " ".join(c.image.pip) or "-")
    if any(c.image.labels.get("as_of") for _, c in cells):
        row("as of", lambda c: as_of_words(c) or "not dated")
    if any(c.image.labels.get("yanked") for _, c in cells):
        row("yanked pins", lambda c: c.image.labels.get("yanked", "-"))
    row("Python", lambda c: c.fingerprint.python or "-")
    row("scenario", lambda c: f"{c.scenario.script or c.scenario.id} "
        f"{json.dumps(dict(c.scenario.params), sort_keys=True)}")
    for head, c in cells:
        pins = exact_pins(c)
        if pins:
            lines += ["", f"{head[0].upper()}{head[1:]}, the packages its cell found "
                      "installed:", "", "```text", *pins, "```"]
    return lines


def run_length(settings: Mapping[str, JSON]) -> dict[str, JSON]:
    """The matrix keys of the run's length as made: `budget` (early stop) or
    `iterations`, with `warmup` and `sample_every` (never `iterations` beside `budget`)."""
    early = isinstance(settings.get("max_iterations"), int)
    keys = ("max_iterations", "warmup", "sample_every") if early else (
        "iterations", "warmup", "sample_every")
    out: dict[str, JSON] = {}
    budget = settings.get("budget")
    if early and isinstance(budget, int | float):
        out["budget"] = f"{budget:g}s"
    for k in keys:
        value = settings.get(k)
        if isinstance(value, int) and not (k == "max_iterations" and value == BUDGET_CAP
                                           and "budget" in out):
            out[k] = value
    return out


def calls_made(res: Result) -> int | None:
    """The calls the cell's run measured (its end record's count), None where unknown."""
    made = res.end.iterations if res.end.iterations is not None else res.summary.iterations
    return made or None


def run_words(res: Result) -> str:
    """The run as made, e.g. "a 5 s time budget (554 calls) after 200 warm-up calls"."""
    settings = res.settings
    made = calls_made(res)
    warm = f" after {settings.get('warmup', '?')} warm-up"
    if isinstance(settings.get("max_iterations"), int):
        budget = settings.get("budget")
        seconds = budget if isinstance(budget, int | float) else DEFAULT_BUDGET_S
        ran = f"{made:,} calls measured" if made else "its calls not recorded"
        return f"a {seconds:g} s time budget ({ran}){warm}"
    asked = settings.get("iterations", "?")
    if made and isinstance(asked, int) and made < asked:
        return f"{made:,} of {asked:,} iterations{warm}"
    return f"{asked} iterations{warm}"


def repro_matrix(good: Result | None, bad: Result, script: str) -> str:
    """A matrix running the scenario on both environments exactly as they were."""
    def image(name: str, c: Result) -> object:
        pins = exact_pins(c)
        if pins:
            return {"name": name, "python": interpreter(c), "pip": list(pins)}
        if not abilities(c.runtime).container_images:
            return {"name": name, "python": c.image.ref}
        digest = c.image.digest or ""
        return {"name": name, "ref": digest if "@" in digest else c.image.ref}

    sides = ([("last-good", good)] if good is not None else []) + [("first-bad", bad)]
    scenario: dict[str, object] = {"script": script.rsplit("/", 1)[-1] or "scenario.py",
                                   "id": bad.scenario.id}
    if bad.scenario.params:
        scenario["params"] = dict(bad.scenario.params)
    defaults = run_length(bad.settings)
    doc: dict[str, object] = {"name": f"repro-{bad.scenario.id}",
                              "runtime": (bad.runtime or "local").rpartition("/")[2],
                              "defaults": defaults,
                              "matrix": {"image": [image(n, c) for n, c in sides if c],
                                         "gpu": [bad.gpu.value or "none"],
                                         "scenario": [scenario]}}
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=10_000)


def reproducer(bad: Result, script: str, good: Result | None, *, time: bool = False,
               memory: bool = True) -> str:
    """A stand-alone reproduction without harness: the first bad image's pins and a loop
    as long as the cell's run, printing the verdict's quantity."""
    name = script.rsplit("/", 1)[-1] or "scenario.py"
    asked = bad.settings.get("iterations", 1000)
    calls = calls_made(bad) or (asked if isinstance(asked, int) else 1000)
    warmup = bad.settings.get("warmup", 0)
    if bad.image.pip:
        day = bad.image.labels.get("as_of")
        env = (f"# first bad, {bad.image.label}" + (f" (as of {day})" if day else "") +
               f":\n{interpreter(bad)} -m venv bad && . bad/bin/activate && pip install "
               f"{' '.join(exact_pins(bad))}")
        if good is not None and good.image.pip:
            day = good.image.labels.get("as_of")
            env += (f"\n# the last good instead, {good.image.label}" +
                    (f" (as of {day})" if day else "") +
                    f":\n# {interpreter(good)} -m venv good && . good/bin/activate && "
                    f"pip install {' '.join(exact_pins(good))}")
    elif (command := abilities(bad.runtime).command) is not None:
        env = f"{command} run --rm -it -v $PWD:/w -w /w {bad.image.ref} bash"
    else:
        env = f"# the interpreter of image {bad.image.label}: {bad.image.ref}"
    params = json.dumps(dict(bad.scenario.params), sort_keys=True)
    block = max(1, calls // 10)
    loop = ([f"for i in range({warmup}):\n    mod.step(state)\n"]
            if isinstance(warmup, int) and warmup > 0 else [])
    loop.append(f"times = []\nfor i in range({calls}):\n" if time else
                f"for i in range({calls}):\n")
    if time:
        loop.append("    t0 = time.perf_counter()\n    mod.step(state)\n"
                    "    times.append(time.perf_counter() - t0)\n"
                    f"    if (i + 1) % {block} == 0:\n"
                    f"        last = sorted(times[-{block}:])\n"
                    f"        print(f'calls {{i + 2 - {block}}}..{{i + 1}}: median step "
                    "{last[len(last) // 2] * 1e3:.4g} ms')\n")
    else:
        loop.append("    mod.step(state)\n")
    if memory or not time:
        loop.append("    if i % 100 == 0:\n"
                    "        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
                    "        print(f'call {i}: max RSS {kib} KiB')\n")
    modules = ", ".join(["importlib.util", *(["resource"] if memory or not time else []),
                         *(["time"] if time else [])])
    what = " and ".join([*(["step time"] if time else []),
                         *(["memory"] if memory or not time else [])])
    return (f"## Reproduce without harness\n\nThe run's {warmup} warm-up and {calls:,} "
            f"measured calls, printing {what}:\n\n```sh\n{env}\npython3 - <<'EOF'\n"
            f"import {modules}\n"
            f"spec = importlib.util.spec_from_file_location('scenario', '{name}')\n"
            f"mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
            f"state = mod.setup({params})\n" + "".join(loop) + "EOF\n```\n\n")
