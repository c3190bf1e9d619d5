"""matrix.yaml -> validated `Matrix`. Every error names the file, key path, line and fix."""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from harness.analysis.config import AnalysisConfig
from harness.errors import SpecError
from harness.spec.expand import across_hosts, expand
from harness.spec.model import (
    LOCAL_HOST,
    RUNTIMES,
    GpuSel,
    Host,
    ImageSpec,
    Matrix,
    RunSettings,
    ScenarioSpec,
)
from harness.spec.yamlsrc import Located, PathKey, format_path, load_text

TOP_KEYS = ("name", "runtime", "defaults", "matrix", "exclude", "include", "baseline",
            "analysis", "max-parallel", "fail-fast", "hosts", "slurm", "fit")
MATRIX_KEYS = ("image", "gpu", "scenario")
IMAGE_KEYS = ("name", "ref", "pip", "python")
SCENARIO_KEYS = ("script", "id", "params")
_FIELDS = tuple(f.name for f in dataclasses.fields(RunSettings))
# Both spellings: DESIGN writes `sample_every`, GitHub Actions style writes `max-parallel`.
SETTING_KEYS = _FIELDS + tuple(n.replace("_", "-") for n in _FIELDS if "_" in n)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_ID = re.compile(r"[^A-Za-z0-9_.-]+")


class Ctx:
    def __init__(self, doc: Located, check_files: bool = True):
        self.doc = doc
        self.check_files = check_files   # False: a results directory's copy, cells only

    def fail(self, path: PathKey, problem: str, fix: str = "") -> SpecError:
        return SpecError(self.doc.file, format_path(path), self.doc.line(path), problem, fix)

    def mapping(self, value: Any, path: PathKey, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {_kind(value)}")
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                near = difflib.get_close_matches(str(key), allowed, n=1)
                raise self.fail((*path, str(key)), f"unknown key {key!r}",
                                f"did you mean {near[0]!r}?" if near
                                else f"allowed keys here: {', '.join(allowed)}")
        return value

    def duration(self, value: Any, path: PathKey, fix: str) -> float:
        """Seconds from `90`, `90s`, `20m`, `1h` or `500ms`, or the error at `path`."""
        seconds = parse_duration(value)
        if seconds is None:
            raise self.fail(path, f"bad duration {value!r}", fix)
        return seconds

    def seq(self, value: Any, path: PathKey) -> list[Any]:
        if isinstance(value, list):
            if not value:
                raise self.fail(path, "empty list", "give at least one entry")
            return value
        return [value]


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def load(path: str | Path) -> Matrix:
    """Read and validate a matrix file.

    Raises:
        SpecError: anything wrong in the file, or the file cannot be read.
    """
    file = Path(path)
    return parse(read_text(file, "pass the path of a matrix YAML file"), file)


def read_text(file: Path, fix: str) -> str:
    """A matrix-like file's text; `fix` says how to name the right file.

    Raises:
        SpecError: the file is missing, unreadable or not UTF-8.
    """
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SpecError(str(file), "", None, "file not found", fix) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(file), "", None, f"cannot read: {exc}") from exc


def parse(text: str, file: Path, check_files: bool = True) -> Matrix:
    """Validate matrix text; `file` locates relative scenario paths and names errors.
    `check_files=False` reads the copy a results directory keeps, away from its
    scenario files: the cells it has, not a matrix to run."""
    return parse_located(load_text(text, str(file)), file, check_files)


def parse_located(doc: Located, file: Path, check_files: bool = True) -> Matrix:
    """Validate matrix data already parsed (or built from parsed data, as `harness watch`
    does); errors name `doc.file` and the line `doc.line` gives for the key path."""
    ctx = Ctx(doc, check_files)
    if doc.data is None:
        raise ctx.fail((), "the file is empty", "see examples/ for a matrix to start from")
    top = ctx.mapping(doc.data, (), TOP_KEYS)
    if "matrix" not in top:
        raise ctx.fail((), "missing key 'matrix'", "add matrix: {image: [...], scenario: [...]}")
    name = top.get("name", file.stem)
    if not isinstance(name, str) or not name.strip() or _ID.sub("-", name) != name:
        raise ctx.fail(("name",), f"name must be a word of letters, digits, '.', '_', '-'; "
                       f"got {name!r}")
    runtime = top.get("runtime", "docker")
    if runtime not in RUNTIMES:
        raise ctx.fail(("runtime",), f"unknown runtime {runtime!r}",
                       f"allowed values: {', '.join(RUNTIMES)}")
    defaults = _settings(ctx, top.get("defaults", {}), ("defaults",), RunSettings())
    m = ctx.mapping(top["matrix"], ("matrix",), MATRIX_KEYS)
    for key in ("image", "scenario"):
        if key not in m:
            raise ctx.fail(("matrix",), f"missing key 'matrix.{key}'")
    images = _images(ctx, m["image"], runtime)
    gpus = tuple(_gpu(ctx, g, ("matrix", "gpu", i))
                 for i, g in enumerate(ctx.seq(m.get("gpu", "none"), ("matrix", "gpu"))))
    if len({g.value for g in gpus}) != len(gpus):
        raise ctx.fail(("matrix", "gpu"), "the same GPU is listed twice")
    scenarios = _scenarios(ctx, m["scenario"], file.parent, defaults)
    baseline = _baseline(ctx, top.get("baseline"), images)
    analysis = _analysis(ctx, top.get("analysis", {}))
    max_parallel = top.get("max-parallel")
    if max_parallel is not None and (type(max_parallel) is not int or max_parallel < 1):
        raise ctx.fail(("max-parallel",), "must be a positive integer")
    fail_fast = top.get("fail-fast", False)
    if not isinstance(fail_fast, bool):
        raise ctx.fail(("fail-fast",), "must be true or false")
    cells = expand(ctx, images, gpus, scenarios, top.get("exclude", []), top.get("include", []),
                   file.parent, defaults)
    hosts = _hosts(ctx, top.get("hosts"), runtime)
    from harness.spec.slurm import parse_slurm

    slurm = parse_slurm(ctx, top.get("slurm"), runtime, gpus, hosts)
    from harness.spec.fitblock import parse_fit

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
    return _ID.sub("-", rest).strip("-") or "host"


def _hosts(ctx: Ctx, value: Any, runtime: str) -> tuple[Host, ...]:
    if value is None:
        return (LOCAL_HOST,)
    if runtime != "docker":
        raise ctx.fail(("hosts",), "hosts are Docker endpoints", "use `runtime: docker`")
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
        if _ID.sub("-", label) != label:
            raise ctx.fail((*path, "name"), f"bad host name {label!r}")
        out.append(Host(label, url))
    labels = [h.label for h in out]
    for i, h in enumerate(out):
        if labels.index(h.label) != i:
            raise ctx.fail(("hosts", i), f"two hosts share the name {h.label!r}",
                           "give one a mapping {name: ..., url: ...}")
    return tuple(out)


def image_label(ref: str) -> str:
    """`nvcr.io/nvidia/tensorflow:22.12-tf1-py3` -> `22.12-tf1-py3`."""
    last = ref.rsplit("/", 1)[-1]
    name, _, tag = last.partition(":")
    return _ID.sub("-", tag or name).strip("-") or "image"


def _unique(ctx: Ctx, keys: list[str], key: str, what: str, fix: str) -> None:
    """Each of `matrix.<key>`'s entries has its own `what` (a label, an id).

    Raises:
        SpecError: at the second entry that repeats one.
    """
    for i, k in enumerate(keys):
        if keys.index(k) != i:
            raise ctx.fail(("matrix", key, i), f"two {key}s share the {what} {k!r}", fix)


def _images(ctx: Ctx, value: Any, runtime: str) -> tuple[ImageSpec, ...]:
    out = [parse_image(ctx, item, ("matrix", "image", i), runtime, i)
           for i, item in enumerate(ctx.seq(value, ("matrix", "image")))]
    _unique(ctx, [img.label for img in out], "image", "label",
            "give one of them a mapping with a distinct `name:`")
    return tuple(out)


def parse_image(ctx: Ctx, item: Any, path: PathKey, runtime: str, index: int) -> ImageSpec:
    if isinstance(item, str) and item.strip():
        label = image_label(item) if runtime == "docker" else _ID.sub("-", Path(item).name)
        return ImageSpec(label=label, ref=item.strip(), index=index)
    if not isinstance(item, dict):
        raise ctx.fail(path, f"an image is a string or a mapping, got {_kind(item)}")
    ctx.mapping(item, path, IMAGE_KEYS)
    pip = item.get("pip", [])
    if isinstance(pip, str):
        pip = [pip]
    if not isinstance(pip, list) or not all(isinstance(p, str) and p.strip() for p in pip):
        raise ctx.fail((*path, "pip"), "pip must be a list of requirement strings")
    python = item.get("python")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise ctx.fail((*path, "python"), "python must be an interpreter name or path")
    ref = item.get("ref")
    if runtime == "docker":
        if not isinstance(ref, str) or not ref.strip():
            raise ctx.fail(path, "a docker image mapping needs `ref: REPO:TAG`")
        if pip:
            raise ctx.fail((*path, "pip"), "pip requirement sets are for `runtime: local`",
                           "build an image with those packages (images/) and name it in ref")
    else:
        if ref is not None:
            raise ctx.fail((*path, "ref"), "`ref` is for docker images",
                           "for the local runtime give `python:` and/or `pip:`")
        ref = python or "python3"
    name = item.get("name")
    if name is None:
        name = image_label(ref) if runtime == "docker" else _ID.sub("-", "_".join(pip) or ref)
    if not isinstance(name, str) or not _ID.sub("", name) or _ID.sub("-", name) != name:
        raise ctx.fail((*path, "name"), f"name must be letters, digits, '.', '_', '-'; "
                       f"got {name!r}")
    return ImageSpec(label=name, ref=ref, index=index, pip=tuple(pip), python=python)


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


def parse_scenario(ctx: Ctx, item: Any, path: PathKey, base: Path,
                   defaults: RunSettings) -> ScenarioSpec:
    given_as_path = isinstance(item, str)
    if isinstance(item, str):
        item = {"script": item}
    if not isinstance(item, dict):
        raise ctx.fail(path, f"a scenario is a path or a mapping, got {_kind(item)}")
    ctx.mapping(item, path, SCENARIO_KEYS + SETTING_KEYS)
    script = item.get("script")
    if not isinstance(script, str) or not script.strip():
        raise ctx.fail(path, "missing `script: PATH/TO/scenario.py`")
    try:
        resolved = (base / script).resolve()
        is_file = resolved.is_file()
    except OSError as exc:
        raise ctx.fail((*path, "script") if "script" in item else path,
                       f"scenario path unusable: {exc.strerror}",
                       "give a short path to an existing .py file") from exc
    if not is_file and ctx.check_files:
        raise ctx.fail(path if given_as_path else (*path, "script"),
                       f"scenario file not found: {script} (looked at {resolved})",
                       "paths are relative to the matrix file's directory")
    sid = item.get("id", resolved.stem)
    if not isinstance(sid, str) or not sid or _ID.sub("-", sid) != sid:
        raise ctx.fail((*path, "id"), f"id must be letters, digits, '.', '_', '-'; got {sid!r}")
    params = item.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        raise ctx.fail((*path, "params"), f"params must be a mapping, got {_kind(params)}")
    overrides = {k: v for k, v in item.items() if k in SETTING_KEYS}
    settings = _settings(ctx, overrides, path, defaults)
    return ScenarioSpec(id=sid, script=resolved, params=MappingProxyType(dict(params)),
                        settings=settings)


def parse_duration(value: Any) -> float | None:
    if type(value) in (int, float) and value > 0:
        return float(value)
    if isinstance(value, str) and (m := _DURATION.match(value)):
        scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
        seconds = float(m.group(1)) * scale
        return seconds if seconds > 0 else None
    return None


def _settings(ctx: Ctx, value: Any, path: PathKey, base: RunSettings) -> RunSettings:
    raw = ctx.mapping(value or {}, path, SETTING_KEYS)
    changes: dict[str, Any] = {}
    for key, v in raw.items():
        field = key.replace("-", "_")
        here = (*path, key)
        if field == "timeout":
            changes[field] = ctx.duration(v, here, "write e.g. 90s, 20m, 1h or 600")
        elif field == "sample_interval":
            if type(v) not in (int, float) or not 0.01 <= v <= 3600:
                raise ctx.fail(here, "must be a number of seconds between 0.01 and 3600")
            changes[field] = float(v)
        elif field in ("iterations", "warmup", "sample_every", "repeats", "min_iterations",
                       "max_iterations", "rounds"):
            low = 0 if field in ("warmup", "repeats", "rounds") else 1
            if type(v) is not int or v < low:
                raise ctx.fail(here, f"must be an integer >= {low}, got {v!r}",
                               f"write a whole number, e.g. {key}: {getattr(RunSettings(), field)}")
            changes[field] = v
        elif field in ("pythonmalloc", "network"):
            if not isinstance(v, bool):
                raise ctx.fail(here, f"must be true or false, got {v!r}")
            changes[field] = v
        elif field in ("mem_limit", "shm_size"):
            if not (isinstance(v, str) and re.fullmatch(r"\d+[bkmgBKMG]?", v)) and not (
                    type(v) is int and v > 0):
                raise ctx.fail(here, f"bad size {v!r}", "write e.g. 512m or 2g")
            changes[field] = str(v)
        elif field == "env":
            if not isinstance(v, dict) or not all(
                    isinstance(k, str) and isinstance(x, str | int | float) for k, x in v.items()):
                raise ctx.fail(here, "env must be a mapping of NAME: value")
            changes[field] = MappingProxyType({k: str(x) for k, x in v.items()})
    result = dataclasses.replace(base, **changes)
    if result.max_iterations is not None and result.max_iterations < result.min_iterations:
        raise ctx.fail(path, f"max_iterations ({result.max_iterations}) is below "
                       f"min_iterations ({result.min_iterations})",
                       "raise max_iterations or lower min_iterations")
    return result


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


def analysis_of(file: Path, overrides: Sequence[str] = ()) -> AnalysisConfig:
    """The `analysis:` block of a matrix file (a results directory keeps its copy),
    with `analysis.KEY=VALUE` overrides (`harness report --reanalyze --set`); a missing
    file gives the defaults.

    Raises:
        SpecError: the file's block or an override is not a valid setting (an override
            is named as `--set`, with the nearest key when it has none such).
    """
    doc = (load_text(read_text(file, "pass a results directory"), str(file))
           if file.is_file() else Located(str(file), None, {}))
    top = doc.data if isinstance(doc.data, dict) else {}
    block = top.get("analysis") or {}
    cfg = _analysis(Ctx(doc), block)      # the file's own block, its errors located
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
                            else "the keys are those of a matrix's analysis: block")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise SpecError("--set", text, None, "the value is not a number or true/false",
                            "e.g. --set analysis.alpha=0.01") from exc
        block.pop(name.replace("_", "-"), None)
        block[name.replace("-", "_")] = parsed
    return _analysis(Ctx(Located("--set", None, {})), block)


def _analysis(ctx: Ctx, value: Any) -> AnalysisConfig:
    names = tuple(f.name for f in dataclasses.fields(AnalysisConfig))
    raw = ctx.mapping(value or {}, ("analysis",), names + tuple(n.replace("_", "-") for n in names))
    changes: dict[str, Any] = {}
    for key, v in raw.items():
        field = key.replace("-", "_")
        kind = type(getattr(AnalysisConfig(), field))
        ok = isinstance(v, bool) if kind is bool else (
            type(v) is int if kind is int else type(v) in (int, float))
        if not ok:
            raise ctx.fail(("analysis", key), f"must be a {kind.__name__}, got {v!r}",
                           f"write e.g. {key}: {str(getattr(AnalysisConfig(), field)).lower()}")
        changes[field] = kind(v)
    try:
        return AnalysisConfig(**changes)
    except ValueError as exc:
        # The message starts "analysis.<field>: ..."; point at the key as it was written.
        field, _, problem = str(exc).partition(": ")
        written = next((k for k in raw if f"analysis.{k.replace('-', '_')}" == field), None)
        raise ctx.fail(("analysis", written) if written else ("analysis",), problem or str(exc),
                       "use a value in that range, or drop the key for the default") from exc

