"""matrix.yaml -> validated `Matrix`: its top keys, and its `analysis:`, `fit:` and `slurm:`
blocks. Every error names the file, key path, line and fix."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from harness.errors import InputError, SpecError
from harness.matrixfile.cells import across_hosts, expand
from harness.matrixfile.entries import (
    IMAGES_EXAMPLE,
    SCENARIO_EXAMPLE,
    SCENARIO_KEYS,
    SETTING_KEYS,
    STARTER,
    Ctx,
    as_word,
    image_label,
    is_word,
    length_in,
    parse_images,
    parse_scenario,
    parse_settings,
    to_word,
)
from harness.matrixfile.model import (
    ABILITIES,
    DEFAULT_RUNTIME,
    LOCAL_HOST,
    RUNTIMES,
    Cell,
    FitSpec,
    GpuSel,
    Host,
    ImageSpec,
    Matrix,
    RunSettings,
    ScenarioSpec,
    SlurmSpec,
    abilities,
)
from harness.matrixfile.yamlsrc import Located, PathKey, format_path, load_text, read_text
from harness.thresholds import SETTABLE, AnalysisConfig

__all__ = ["MATRIX_KEYS", "SCENARIO_KEYS", "SETTING_KEYS", "TOP_KEYS", "analysis_block",
           "analysis_of", "load", "parse", "parse_located", "read_text"]

TOP_KEYS = ("name", "runtime", "defaults", "matrix", "exclude", "include", "baseline",
            "analysis", "max-parallel", "fail-fast", "hosts", "slurm", "fit")
MATRIX_KEYS = ("image", "gpu", "scenario")


def load(path: str | Path) -> Matrix:
    """Read and validate a matrix file.

    Raises:
        SpecError: anything wrong in the file, or the file cannot be read.
    """
    file = Path(path)
    text = read_text(file, "pass the path of a matrix YAML file")
    if file.suffix == ".py":
        # a scenario where a matrix belongs: "not valid YAML" would leave the user there
        raise SpecError(str(file), "", None, "a Python file, where a matrix YAML file "
                        "belongs: a matrix names the images and the scenarios to run",
                        f"write one beside it, e.g. m.yaml: `matrix: {{image: [python3], "
                        f"scenario: [{file.name}]}}`, then `harness sweep m.yaml` (or call "
                        "it from Python: harness.check(step))")
    return parse(text, file)


def load_copy(copy: Path, original: Path) -> Matrix:
    """The matrix a run recorded (`copy`), its scenario paths resolved beside `original`:
    what the run ran, whatever the original says now.

    Raises:
        SpecError: the copy cannot be read or is not a valid matrix.
    """
    text = read_text(copy, f"run with --matrix {original}")
    return parse_located(load_text(text, str(copy)), original)


def parse(text: str, file: Path, check_files: bool = True) -> Matrix:
    """Validate matrix text; `file` locates scenario paths and names errors.
    `check_files=False` reads a results directory's copy, away from its scenarios."""
    return parse_located(load_text(text, str(file)), file, check_files)


def parse_located(doc: Located, file: Path, check_files: bool = True) -> Matrix:
    """Validate matrix data already parsed; errors name `doc.file` and the key's line."""
    ctx = Ctx(doc, check_files, file.parent)
    if doc.data is None:
        raise ctx.fail((), "the file is empty", STARTER)
    top = ctx.mapping(doc.data, (), TOP_KEYS)
    if "matrix" not in top:
        raise ctx.fail((), "missing key 'matrix'",
                       f"add `matrix: {{image: {IMAGES_EXAMPLE['local']}, scenario: "
                       f"{SCENARIO_EXAMPLE}}}` (images of `runtime: docker` or podman: "
                       f"{IMAGES_EXAMPLE['containers']})")
    name = top.get("name", file.stem)
    if not isinstance(name, str) or not is_word(name):
        raise ctx.fail(("name",), f"name must be one word of letters (any script), digits, "
                       f"'.', '_', '-' (results go to reports/<name>/); got {name!r}",
                       f"name: {as_word(name, as_word(file.stem, 'matrix'))}")
    runtime = top.get("runtime", DEFAULT_RUNTIME)
    if runtime not in RUNTIMES:
        raise ctx.fail(("runtime",), f"unknown runtime {runtime!r}",
                       f"allowed values: {', '.join(RUNTIMES)}")
    defaults = parse_settings(ctx, top.get("defaults", {}), ("defaults",), RunSettings())
    ctx.length_set = length_in(top.get("defaults"))
    m = ctx.mapping(top["matrix"], ("matrix",), MATRIX_KEYS)
    containers = abilities(runtime).container_images
    for key, example in (("image", IMAGES_EXAMPLE["containers" if containers else "local"]),
                         ("scenario", SCENARIO_EXAMPLE)):
        if key not in m:
            what = ("the images to compare, oldest first" if key == "image" else
                    "the scenario files, each defining setup(params) and step(state), "
                    "relative to this file")
            raise ctx.fail(("matrix",), f"missing key 'matrix.{key}'",
                           f"add `{key}: {example}` under matrix: ({what})")
    images = _images(ctx, m["image"], runtime)
    gpus = tuple(_gpu(ctx, g, ("matrix", "gpu", i))
                 for i, g in enumerate(ctx.seq(m.get("gpu", "none"), ("matrix", "gpu"))))
    if len({g.value for g in gpus}) != len(gpus):
        raise ctx.fail(("matrix", "gpu"), "the same GPU is listed twice")
    scenarios = _scenarios(ctx, m["scenario"], file.parent, defaults)
    baseline = _baseline(ctx, top.get("baseline"), images)
    analysis = analysis_block(ctx, top.get("analysis", {}))
    max_parallel = top.get("max-parallel")
    if max_parallel is not None and (type(max_parallel) is not int or max_parallel < 1):
        raise ctx.fail(("max-parallel",), "must be a positive integer")
    fail_fast = top.get("fail-fast", False)
    if not isinstance(fail_fast, bool):
        raise ctx.fail(("fail-fast",), "must be true or false")
    cells = expand(ctx, images, gpus, scenarios, top.get("exclude", []), top.get("include", []),
                   file.parent, defaults, runtime)
    hosts = _hosts(ctx, top.get("hosts"), runtime)
    slurm = parse_slurm(ctx, top.get("slurm"), runtime, gpus, hosts)
    fit = parse_fit(ctx, top.get("fit"), scenarios)
    return Matrix(name=name, file=file, runtime=runtime, images=images, gpus=gpus,
                  scenarios=scenarios, cells=across_hosts(cells, hosts), baseline=baseline,
                  analysis=analysis, max_parallel=max_parallel, fail_fast=fail_fast,
                  hosts=hosts, slurm=slurm, fit=fit)


def host_label(url: str) -> str:
    """`ssh://root@gpu-4090:22` -> `gpu-4090`; `unix:///var/run/docker.sock` -> `local`."""
    if url.startswith("unix://"):
        return "local"
    rest = url.split("://", 1)[-1]
    rest = rest.rsplit("@", 1)[-1].split("/", 1)[0]
    # [ipv6]:port or name:port
    rest = rest[1:].split("]", 1)[0] if rest.startswith("[") else rest.split(":", 1)[0]
    return to_word(rest).strip("-") or "host"


def _hosts(ctx: Ctx, value: Any, runtime: str) -> tuple[Host, ...]:
    if value is None:
        return (LOCAL_HOST,)
    if not abilities(runtime).serves_hosts:
        takes = ", ".join(f"`runtime: {n}`" for n in RUNTIMES if abilities(n).serves_hosts)
        raise ctx.fail(("hosts",), f"runtime {runtime} runs no `hosts:` endpoints",
                       f"hosts are Docker API endpoints: use {takes}")
    out: list[Host] = []
    for i, item in enumerate(ctx.seq(value, ("hosts",))):
        path = ("hosts", i)
        if isinstance(item, dict):
            ctx.mapping(item, path, ("name", "url"))
            url, name = item.get("url"), item.get("name")
        else:
            url, name = item, None
        if not isinstance(url, str) or not url.strip():
            raise ctx.fail(path, "a host is a Docker endpoint URL or context name",
                           "e.g. unix:///var/run/docker.sock, tcp://10.0.0.5:2376, "
                           "ssh://user@gpu-4090, or {name: 4090, url: ssh://...}")
        if "://" in url and url.split("://", 1)[0] not in ("unix", "tcp", "ssh", "http",
                                                            "https", "npipe"):
            raise ctx.fail(path, f"unknown endpoint scheme in {url!r}",
                           "allowed: unix://, tcp://, ssh://, or a docker context name")
        label = name if isinstance(name, str) and name else host_label(url)
        if not is_word(label):
            raise ctx.fail((*path, "name"), f"a host's name must be one word of letters "
                           f"(any script), digits, '.', '_', '-' (it names the host's cells "
                           f"and their directories); got {label!r}",
                           f"{{name: {as_word(label, f'host{i}')}, url: {url}}}")
        out.append(Host(label, url))
    labels = [h.label for h in out]
    for i, h in enumerate(out):
        if labels.index(h.label) != i:
            raise ctx.fail(("hosts", i), f"two hosts share the name {h.label!r}",
                           "give one a mapping {name: ..., url: ...}")
    return tuple(out)


def _unique(ctx: Ctx, keys: list[str], key: str, what: str, fix: str) -> None:
    """Each of `matrix.<key>`'s entries has its own `what` (a label, an id).

    Raises:
        SpecError: at the second entry that repeats one.
    """
    for i, k in enumerate(keys):
        if keys.index(k) != i:
            raise ctx.fail(("matrix", key, i), f"two {key}s share the {what} {k!r}", fix)


def _images(ctx: Ctx, value: Any, runtime: str) -> tuple[ImageSpec, ...]:
    out: list[ImageSpec] = []
    plain: list[bool] = []          # from a bare reference (a string), not a mapping
    for i, item in enumerate(ctx.seq(value, ("matrix", "image"))):
        found = parse_images(ctx, item, ("matrix", "image", i), runtime, len(out))
        out.extend(found)
        plain.extend([isinstance(item, str)] * len(found))
    # Two references with one tag (`a/x:1.0`, `b/y:1.0`): each labelled with its name.
    labels = [img.label for img in out]
    out = [dataclasses.replace(img, label=image_label(img.ref, qualified=True))
           if bare and labels.count(img.label) > 1
           and abilities(runtime).container_images else img
           for img, bare in zip(out, plain, strict=True)]
    _unique(ctx, [img.label for img in out], "image", "label",
            "give one of them a mapping with a distinct `name:`")
    return tuple(out)


def _gpu(ctx: Ctx, value: Any, path: PathKey) -> GpuSel:
    if type(value) is int and value >= 0:
        return GpuSel(str(value))
    if isinstance(value, str) and (value in ("all", "none") or value.isdigit()
                                   or re.fullmatch(r"(GPU|MIG)-[0-9a-fA-F-]{8,}", value)):
        return GpuSel(value)
    raise ctx.fail(path, f"bad GPU {value!r}",
                   "use an index (0), a UUID (GPU-...), \"all\" or \"none\"")


def _scenarios(ctx: Ctx, value: Any, base: Path,
               defaults: RunSettings) -> tuple[ScenarioSpec, ...]:
    out = [parse_scenario(ctx, item, ("matrix", "scenario", i), base, defaults)
           for i, item in enumerate(ctx.seq(value, ("matrix", "scenario")))]
    _unique(ctx, [s.id for s in out], "scenario", "id", "give one of them `id: SOMETHING_ELSE`")
    return tuple(out)


def _baseline(ctx: Ctx, value: Any, images: tuple[ImageSpec, ...]) -> str | None:
    if value is None:
        return None
    raw = ctx.mapping(value, ("baseline",), ("image",))
    want = raw.get("image")
    for img in images:
        if want in (img.label, img.ref):
            return img.label
    raise ctx.fail(("baseline", "image"), f"baseline image {want!r} is not in matrix.image",
                   f"allowed values: {', '.join(i.label for i in images)}")


def check_images(matrix: Matrix, runtime: str) -> None:
    """Refuse a container runtime for a matrix whose images are interpreters with pins
    (it would pull an image named after the interpreter).

    Raises:
        InputError: naming the runtime, the file and an image, with the fix.
    """
    if runtime in ABILITIES and abilities(runtime).container_images and not abilities(
            matrix.runtime).container_images:    # an unknown name: get_runtime says so
        first = matrix.images[0] if matrix.images else None
        what = (f" ({first.label}: {first.ref}"
                + (f" with {', '.join(first.pip)}" if first.pip else "") + ")") if first else ""
        raise InputError(f"--runtime {runtime}: {matrix.file} names its images for "
                         f"`runtime: {matrix.runtime}`, interpreters and pip pins{what}, "
                         f"not container images\n  fix: leave out --runtime {runtime} (the "
                         f"matrix's runtime, {matrix.runtime}, runs them), or name images by "
                         f"`ref:` under `runtime: {runtime}`")


def check_applied(matrix: Matrix, runtime: str) -> None:
    """Refuse, rather than drop, a setting the running runtime cannot honour (`mem_limit`
    without a cgroup or Slurm; `shm_size`, `network` without a container).

    Raises:
        SpecError: naming the first such key of the matrix file and its line.
    """
    can = abilities(runtime)
    needs: dict[str, str] = {}
    if not can.own_cgroup and matrix.slurm is None:
        cgroups = ", ".join(f"runtime: {n}" for n in RUNTIMES if abilities(n).own_cgroup)
        needs.update({k: f"or use {cgroups} (a cgroup per cell), or add a slurm: block "
                         "(its jobs' --mem)" for k in ("mem_limit", "mem-limit")})
    if not can.container_images:
        boxes = ", ".join(f"runtime: {n}" for n in RUNTIMES if abilities(n).container_images)
        needs.update({k: f"or use {boxes} (a container per cell)"
                      for k in ("shm_size", "shm-size", "network")})
    if not needs:
        return
    try:
        lines = load_text(matrix.file.read_text(encoding="utf-8"), str(matrix.file)).lines
    except (OSError, SpecError):
        return
    found = sorted((line, path) for path, line in lines.items()
                   if path and path[-1] in needs and path[0] in ("defaults", "matrix", "include")
                   and "params" not in path and "env" not in path)
    if not found:
        return
    line, path = found[0]
    key = str(path[-1])
    what = ("its cells share this host's memory, no cgroup of their own"
            if key.startswith("mem") else "its cells run as processes of this host, in no "
            "container")
    raise SpecError(str(matrix.file), format_path(path), line,
                    f"{key} is not applied by runtime {runtime} ({what})",
                    f"remove {key}, {needs[key]}")


# The `analysis:` block (and `--set analysis.KEY=VALUE`) -> `AnalysisConfig`.


def analysis_of(file: Path, overrides: Sequence[str] = ()) -> AnalysisConfig:
    """The `analysis:` block of a matrix file with `analysis.KEY=VALUE` overrides; a
    missing file gives the defaults.

    Raises:
        SpecError: the block or an override (named as `--set`) is not a valid setting.
    """
    doc = (load_text(read_text(file, "pass a results directory"), str(file))
           if file.is_file() else Located(str(file), None, {}))
    top = doc.data if isinstance(doc.data, dict) else {}
    block = top.get("analysis") or {}
    cfg = analysis_block(Ctx(doc), block)      # the file's own block, its errors located
    if not overrides:
        return cfg
    block = dict(block)
    names = [f.name for f in dataclasses.fields(AnalysisConfig)]
    for text in overrides:
        key, eq, value = text.partition("=")
        section, dot, name = key.strip().partition(".")
        if not eq or section != "analysis" or not dot:
            raise SpecError("--set", text, None, "expected analysis.KEY=VALUE",
                            "e.g. --set analysis.alpha=0.01")
        if name.replace("-", "_") not in names:
            near = difflib.get_close_matches(name.replace("-", "_"), names, n=1)
            raise SpecError("--set", text, None, f"analysis has no key {name!r}",
                            f"did you mean analysis.{near[0]}?" if near
                            else f"the keys: {', '.join(names)}")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise SpecError("--set", text, None, "the value is not a number or true/false",
                            "e.g. --set analysis.alpha=0.01") from exc
        block.pop(name.replace("_", "-"), None)
        block[name.replace("-", "_")] = parsed
    return analysis_block(Ctx(Located("--set", None, {})), block, via_set=True)


def analysis_block(ctx: Ctx, value: Any, via_set: bool = False) -> AnalysisConfig:
    """The analysis block as settings; a fix is written as the value was given (YAML
    key or `--set`)."""
    if isinstance(value, dict):
        constants = {f.name for f in dataclasses.fields(AnalysisConfig)} - set(SETTABLE)
        for key in value:
            if str(key).replace("-", "_") in constants:
                raise ctx.fail(("analysis", str(key)),
                               f"{key!r} is one of harness's named constants "
                               "(harness/thresholds.py), not a setting",
                               f"drop it; the keys a matrix sets: {', '.join(SETTABLE)}")
    raw = ctx.mapping(value or {}, ("analysis",),
                      SETTABLE + tuple(n.replace("_", "-") for n in SETTABLE))
    changes: dict[str, Any] = {}
    for key, v in raw.items():
        field = key.replace("-", "_")
        kind = type(getattr(AnalysisConfig(), field))
        v = _number(v) if kind is float else v
        ok = isinstance(v, bool) if kind is bool else (
            type(v) is int if kind is int else type(v) in (int, float))
        if not ok:
            default = str(getattr(AnalysisConfig(), field)).lower()
            raise ctx.fail(("analysis", key), f"must be a {kind.__name__}, got {v!r}",
                           f"e.g. --set analysis.{field}={default}" if via_set
                           else f"write e.g. {key}: {default}")
        changes[field] = kind(v)
    try:
        return AnalysisConfig(**changes)
    except ValueError as exc:
        # The message starts "analysis.<field>: ..."; point at the key as it was written.
        field, _, problem = str(exc).partition(": ")
        written = next((k for k in raw if f"analysis.{k.replace('-', '_')}" == field), None)
        raise ctx.fail(("analysis", written) if written else ("analysis",), problem or str(exc),
                       "use a value in that range, or drop the key for the default") from exc


def _number(v: Any) -> Any:
    """`1e-05` as a number: YAML 1.1 reads exponent form without a dot as a string."""
    if isinstance(v, str):
        try:
            return float(v) if math.isfinite(float(v)) else v
        except ValueError:
            return v
    return v


# The `fit:` block (and `harness fit --param`) -> `FitSpec`, validated.
FIT_KEYS = ("param", "range")
_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")
_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RANGE_FIX = "write the range as LO..HI with whole numbers, e.g. 1..64"


def parse_range(value: Any) -> tuple[int, int] | None:
    """(lo, hi) from `1..64` or `[1, 64]`; None when it is neither or lo > hi."""
    if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
        lo, hi = value
    elif isinstance(value, str) and (m := _RANGE.match(value)):
        lo, hi = int(m.group(1)), int(m.group(2))
    else:
        return None
    return (lo, hi) if lo <= hi else None


def check_param(param: str, scenarios: tuple[ScenarioSpec, ...]) -> str | None:
    """Why `param` cannot be fitted in these scenarios (not a name, or set to a
    non-integer), or None."""
    if not _PARAM.match(param):
        return f"{param!r} is not a param name"
    for s in scenarios:
        v = s.params.get(param)
        if v is not None and type(v) is not int:
            return (f"scenario {s.id} sets {param} to {v!r}, not a whole number; fit "
                    "varies integer params only")
    return None


def parse_fit(ctx: Ctx, value: Any, scenarios: tuple[ScenarioSpec, ...]) -> FitSpec | None:
    """Validate `fit: {param: batch, range: 1..64}` (None when absent).

    Raises:
        SpecError: an unknown or missing key, a bad range, or a non-integer param.
    """
    if value is None:
        return None
    raw = ctx.mapping(value, ("fit",), FIT_KEYS)
    for key in FIT_KEYS:
        if key not in raw:
            raise ctx.fail(("fit",), f"missing key 'fit.{key}'",
                           "write e.g. fit: {param: batch, range: 1..64}")
    param = raw["param"]
    if not isinstance(param, str):
        raise ctx.fail(("fit", "param"), f"param must be a name, got {param!r}",
                       "name the integer scenario param to vary, e.g. param: batch")
    problem = check_param(param, scenarios)
    if problem is not None:
        raise ctx.fail(("fit", "param"), problem,
                       "name an integer scenario param, e.g. param: batch")
    bounds = parse_range(raw["range"])
    if bounds is None:
        raise ctx.fail(("fit", "range"), f"bad range {raw['range']!r}", RANGE_FIX)
    return FitSpec(param, bounds[0], bounds[1])


def probe_cell(cell: Cell, param: str, value: int) -> Cell:
    """The cell with `param` set to `value`, its own id, no repeats (a probe asks
    whether it runs) and `heap: stock`, since the quiet heap lowers a framework's peaks
    and a fit answers for the program as it runs."""
    params = dict(cell.scenario.params)
    params[param] = value
    settings = dataclasses.replace(cell.settings, repeats=0, heap="stock")
    scenario = dataclasses.replace(cell.scenario, params=MappingProxyType(params),
                                   settings=settings)
    return dataclasses.replace(cell, id=f"{cell.id}.{param}{value}", scenario=scenario)


# The `slurm:` block -> `SlurmSpec`, validated like every other key.
SLURM_KEYS = ("partition", "account", "time", "gpu_type", "gpus_per_node", "mem", "options",
        "pyxis")
ALLOWED = SLURM_KEYS + tuple(k.replace("_", "-") for k in SLURM_KEYS if "_" in k)
# What harness itself sets for every job: a matrix naming them would fight it.
OWN_OPTIONS = ("--gres", "--gpus", "--mem", "--time", "-t", "--output", "-o", "--error",
               "-e", "--job-name", "-J", "--wait", "-W", "--parsable", "--partition", "-p",
               "--account", "-A", "--wrap", "--requeue", "--no-requeue", "--array", "-a")
_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")
_SIZE = re.compile(r"^\d+[kmgtKMGT]?$")


def parse_slurm(ctx: Ctx, value: Any, runtime: str, gpus: tuple[GpuSel, ...],
                hosts: tuple[Host, ...]) -> SlurmSpec | None:
    """Validate `slurm:` (None when absent).

    Raises:
        SpecError: a bad key or value, an option harness sets, or `slurm:` with `hosts:`.
    """
    if value is None:
        return None
    raw = ctx.mapping({} if value is True else value, ("slurm",), ALLOWED)
    if len(hosts) > 1 or hosts[0].url is not None:
        raise ctx.fail(("slurm",), "`slurm:` and `hosts:` both say where cells run",
                       "drop `hosts:`: Slurm picks the nodes")
    got: dict[str, Any] = {}
    for key, v in raw.items():
        field, here = key.replace("-", "_"), ("slurm", key)
        if field in ("partition", "account", "gpu_type"):
            if not isinstance(v, str) or not _NAME.match(v):
                raise ctx.fail(here, f"must be a Slurm name (letters, digits, '_.+-'), "
                               f"got {v!r}", f"e.g. {key}: " + {"partition": "gpu",
                               "account": "mylab", "gpu_type": "a100"}[field])
            got[field] = v
        elif field == "time":
            got[field] = ctx.duration(v, here, "write e.g. 30m, 2h or 90s")
        elif field == "gpus_per_node":
            if type(v) is not int or v < 1:
                raise ctx.fail(here, f"must be an integer >= 1, got {v!r}")
            got[field] = v
        elif field == "mem":
            if not (type(v) is int and v > 0) and not (isinstance(v, str) and _SIZE.match(v)):
                raise ctx.fail(here, f"bad size {v!r}", "write e.g. 8g or 16000m")
            got[field] = str(v)
        elif field == "pyxis":
            if not isinstance(v, bool):
                raise ctx.fail(here, f"must be true or false, got {v!r}")
            if v and not abilities(runtime).container_images:
                runs = " or ".join(f"`runtime: {n}`" for n in RUNTIMES
                                   if abilities(n).container_images)
                raise ctx.fail(here, "pyxis runs container images", f"use {runs}")
            got[field] = v
        elif field == "options":
            got[field] = _options(ctx, v, here)
    if (any(g.value == "all" for g in gpus) and "gpus_per_node" not in got):
        raise ctx.fail(("slurm",), "`gpu: all` needs to know how many GPUs a job asks for",
                       "add slurm.gpus_per_node: N (the GPUs of one node)")
    return SlurmSpec(**got)


def _options(ctx: Ctx, value: Any, path: tuple[str, ...]) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(o, str) and o for o in items):
        raise ctx.fail(path, "options must be a list of sbatch options",
                       "e.g. options: [--qos=high, --constraint=a100]")
    for i, opt in enumerate(items):
        name = opt.split("=", 1)[0]
        if not opt.startswith("-") or " " in name:
            raise ctx.fail((*path, i), f"{opt!r} is not an sbatch option",
                           "one option per entry, written --name=value")
        if name in OWN_OPTIONS:
            own = {"--partition": "partition", "-p": "partition", "--account": "account",
                   "-A": "account", "--time": "time", "-t": "time", "--mem": "mem",
                   "--gres": "gpu_type (and the matrix's gpu:)",
                   "--gpus": "gpu_type (and the matrix's gpu:)"}.get(name)
            raise ctx.fail((*path, i), f"harness sets {name} itself",
                           f"use slurm.{own}" if own else "drop it")
    return tuple(items)
