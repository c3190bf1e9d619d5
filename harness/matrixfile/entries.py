"""The matrix parts its readers share: `Ctx` (a document and its located errors), image
and scenario entries with their run settings, names and durations.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
import unicodedata
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.errors import SpecError
from harness.matrixfile import lockfile, releases
from harness.matrixfile.lockfile import NAME
from harness.matrixfile.model import (
    BUDGET_CAP,
    HEAP_MODES,
    ImageSpec,
    RunSettings,
    ScenarioSpec,
    abilities,
)
from harness.matrixfile.yamlsrc import Located, PathKey, format_path

IMAGE_KEYS = ("name", "ref", "pip", "python", "as_of", "lock")
SCENARIO_KEYS = ("script", "id", "params")
# Settings harness sets alone, for a run again: no matrix key.
INTERNAL = ("budget_calls", "budget_max", "asked_calls", "time_only")
_FIELDS = tuple(f.name for f in dataclasses.fields(RunSettings) if f.name not in INTERNAL)
# Both spellings: `sample_every` and `sample-every`.
SETTING_KEYS = _FIELDS + tuple(n.replace("_", "-") for n in _FIELDS if "_" in n)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
# What to write in an empty matrix: there is no `init` and no installed examples/ folder.
IMAGES_EXAMPLE = {"local": "[{name: old, pip: [PKG==1.0]}, {name: new, pip: [PKG==2.0]}]",
                  "containers": "[REPO:OLD_TAG, REPO:NEW_TAG]"}
SCENARIO_EXAMPLE = "[scenario.py]"
STARTER = (f"write `name: demo`, `runtime: local` and `matrix: {{image: "
           f"{IMAGES_EXAMPLE['local']}, scenario: {SCENARIO_EXAMPLE}}}` in it, scenario.py "
           "(beside it) defining setup(params) and step(state)")

# A name is a word: letters and digits of any script (with combining marks), '_', '.'
# and '-'. Names become directories, cell ids and job names, so path separators, ':',
# spaces, quotes and control characters are refused.
WORD_MARKS = "_.-"


class Ctx:
    """One matrix document being read: each parser reports a bad value through `fail`."""

    def __init__(self, doc: Located, check_files: bool = True, base: Path | None = None):
        self.doc = doc
        self.check_files = check_files   # False: a results directory's copy, cells only
        self.base = base                 # relative paths (`lock:`) start here
        self.length_set = False          # `defaults:` sets a run's length (`LENGTH_KEYS`)

    def fail(self, path: PathKey, problem: str, fix: str = "") -> SpecError:
        return SpecError(self.doc.file, format_path(path), self.doc.line(path), problem, fix)

    def mapping(self, value: Any, path: PathKey, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            one = len(allowed) == 1 and path and isinstance(value, (str, int, float))
            raise self.fail(path, f"expected a mapping, got {kind_of(value)}",
                            f"a matrix file is a mapping of keys: {STARTER}" if not path
                            else f"write {path[-1]}: {{{allowed[0]}: {value}}}" if one
                            else f"give `KEY: VALUE` lines here, keys from: "
                                 f"{', '.join(allowed)}")
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
            problem = duration_problem(value)
            raise self.fail(path, f"bad duration {value!r}" + (
                f": {problem}" if problem != NOT_A_DURATION else ""), fix)
        return seconds

    def seq(self, value: Any, path: PathKey) -> list[Any]:
        if isinstance(value, list):
            if not value:
                raise self.fail(path, "empty list", "give at least one entry")
            return value
        return [value]


def _in_word(char: str) -> bool:
    return char.isalnum() or char in WORD_MARKS or unicodedata.category(char)[0] == "M"


def to_word(text: str, sep: str = "-") -> str:
    """`text` with each run of non-word characters made `sep` (`a b/c` -> `a-b-c`)."""
    return "".join("".join(run) if keep else sep
                   for keep, run in itertools.groupby(text, _in_word))


def is_word(text: str) -> bool:
    """Whether `text` is a name as it stands: not empty, every character a word's."""
    return bool(text) and all(map(_in_word, text))


def as_word(value: Any, fallback: str) -> str:
    """`value` made a word harness accepts as a name (`a b/c` -> `a-b-c`), for a fix."""
    return to_word(str(value) if value is not None else "").strip("-") or fallback


def kind_of(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# Tags that say nothing alone: a bare number (`harness-test/nope:1`) or one that moves.
MOVING_TAGS = frozenset({"latest", "stable", "main", "master", "edge", "nightly", "dev"})


def image_label(ref: str, qualified: bool = False) -> str:
    """`nvcr.io/nvidia/tensorflow:22.12-tf1-py3` -> `22.12-tf1-py3`; the name is put
    before a tag that says nothing alone (`python:latest` -> `python-latest`), or any tag
    when `qualified`."""
    last = ref.rsplit("/", 1)[-1]
    name, _, tag = last.partition(":")
    if tag and (qualified or tag.isdigit() or tag.lower() in MOVING_TAGS):
        tag = f"{name}-{tag}"
    return to_word(tag or name).strip("-") or "image"


def parse_images(ctx: Ctx, item: Any, path: PathKey, runtime: str, index: int
                 ) -> list[ImageSpec]:
    """An image entry: one image, or with `as_of:` one per day (`NAME@DAY`)."""
    image = parse_image(ctx, item, path, runtime, index, dates=True)
    if not isinstance(item, dict) or "as_of" not in item:
        return [image]
    if "lock" in item:
        raise ctx.fail((*path, "as_of"), "as_of resolves a `pip:` list by day; a lock is "
                       "resolved already", "drop as_of, or give pip: [...] instead of lock:")
    if abilities(runtime).container_images:
        raise ctx.fail((*path, "as_of"), f"as_of is for `runtime: local` images with a "
                       f"`pip:` list; {runtime} recipes resolved by day are not supported yet",
                       "use runtime: local for the dated axis, or pin the versions in the "
                       "image's recipe")
    if not image.pip:
        raise ctx.fail((*path, "as_of"), "as_of resolves the entry's `pip:` list by day, "
                       "and this entry has none", "add e.g. pip: [aiohttp]")
    return releases.dated(image, releases.parse_as_of(ctx, item["as_of"], (*path, "as_of")), index)


def parse_image(ctx: Ctx, item: Any, path: PathKey, runtime: str, index: int,
                dates: bool = False) -> ImageSpec:
    if isinstance(item, dict) and "as_of" in item and not dates:
        raise ctx.fail((*path, "as_of"), "as_of belongs on the matrix's image entry",
                       "name one of its dated images here instead, e.g. image: NAME@DAY")
    containers = abilities(runtime).container_images
    if isinstance(item, str) and item.strip():
        label = image_label(item) if containers else to_word(Path(item).name)
        return ImageSpec(label=label, ref=item.strip(), index=index)
    if not isinstance(item, dict):
        raise ctx.fail(path, f"an image is a string or a mapping, got {kind_of(item)}")
    ctx.mapping(item, path, IMAGE_KEYS)
    pip = item.get("pip", [])
    if isinstance(pip, str):
        pip = [pip]
    if not isinstance(pip, list) or not all(isinstance(p, str) and p.strip() for p in pip):
        raise ctx.fail((*path, "pip"), "pip must be a list of requirement strings")
    if (typo := pin_mistake(pip)) is not None:      # (index, problem, fix)
        raise ctx.fail((*path, "pip", typo[0]) if isinstance(item.get("pip"), list) else (
            *path, "pip"), typo[1], typo[2])
    python = item.get("python")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise ctx.fail((*path, "python"), "python must be an interpreter name or path")
    hashes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    lock = None
    if "lock" in item:
        pip, hashes, lock = lock_pins(ctx, item, path, runtime, pip)
    ref = item.get("ref")
    if containers:
        if not isinstance(ref, str) or not ref.strip():
            raise ctx.fail(path, f"a {runtime} image mapping needs `ref: REPO:TAG`")
        if pip:
            raise ctx.fail((*path, "pip"), "pip requirement sets are for `runtime: local`",
                           "build an image with those packages (images/) and name it in ref")
    else:
        if ref is not None:
            raise ctx.fail((*path, "ref"), "`ref` is for container images",
                           "for the local runtime give `python:` and/or `pip:`")
        ref = python or "python3"
    name = item.get("name")
    if name is None and "lock" in item:
        name = to_word(Path(str(item["lock"])).stem).strip("-") or f"lock{index}"
    if name is None:
        name = image_label(ref) if containers else to_word("_".join(pip) or ref)
    if not isinstance(name, str) or not is_word(name):
        raise ctx.fail((*path, "name"), f"name must be one word of letters (any script), "
                       f"digits, '.', '_', '-' (it names the image's cells and their "
                       f"directories); got {name!r}", f"name: {as_word(name, f'image{index}')}")
    return ImageSpec(label=name, ref=ref, index=index, pip=tuple(pip), python=python,
                     hashes=hashes, lock=lock)


def lock_pins(ctx: Ctx, item: dict[str, Any], path: PathKey, runtime: str, pip: Any
              ) -> tuple[list[str], tuple[tuple[str, tuple[str, ...]], ...], str]:
    """An image's `pip`, `hashes` and lock path from its `lock:` file.

    Raises:
        SpecError: `lock` beside `pip`, on a container runtime, or unreadable.
    """
    here = (*path, "lock")
    if pip:
        raise ctx.fail(here, "an image is a `lock:` file or a `pip:` list, not both",
                       "keep one of them")
    if abilities(runtime).container_images:
        raise ctx.fail(here, "lock files are for `runtime: local` images (a venv each)",
                       "use runtime: local, or build an image with those pins (images/)")
    value = item["lock"]
    if not isinstance(value, str) or not value.strip():
        raise ctx.fail(here, "lock must be the path of a requirements.txt, pylock.toml or "
                       "uv.lock", "lock: requirements.txt")
    base = ctx.base if ctx.base is not None else Path(ctx.doc.file).parent
    try:
        found = lockfile.read(base / value)
    except lockfile.LockError as exc:
        raise ctx.fail(here, f"{exc.file}: {exc.problem}", exc.fix) from exc
    pins, hashes = lockfile.image_fields(found)
    return list(pins), hashes, str(found.file)


def parse_scenario(ctx: Ctx, item: Any, path: PathKey, base: Path,
                   defaults: RunSettings) -> ScenarioSpec:
    given_as_path = isinstance(item, str)
    if isinstance(item, str):
        item = {"script": item}
    if not isinstance(item, dict):
        raise ctx.fail(path, f"a scenario is a path or a mapping, got {kind_of(item)}")
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
    if not isinstance(sid, str) or not is_word(sid):
        what = ("id" if "id" in item else
                f"the scenario's id, its file name {resolved.stem!r} without an `id:`,")
        raise ctx.fail((*path, "id") if "id" in item else
                       path if given_as_path else (*path, "script"),
                       f"{what} must be one word of letters (any script), digits, '.', '_', "
                       f"'-' (it names the scenario's cells and their directories); got "
                       f"{sid!r}", f"id: {as_word(sid, 'scenario')}" if "id" in item else
                       f"{{script: {script}, id: {as_word(sid, 'scenario')}}}")
    params = item.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        raise ctx.fail((*path, "params"), f"params must be a mapping, got {kind_of(params)}",
                       "params: {NAME: VALUE, ...}, e.g. params: {batch: 8} (setup(params) "
                       "reads params[\"batch\"]); to run several values, give one scenario "
                       "entry per value, each with its own id")
    overrides = {k: v for k, v in item.items() if k in SETTING_KEYS}
    settings = parse_settings(ctx, overrides, path, defaults)
    if not ctx.length_set and not length_in(overrides):
        # No length given anywhere: a time budget, the calls only capped.
        settings = dataclasses.replace(settings, max_iterations=BUDGET_CAP)
    timeout_past_budget(ctx, overrides, path, settings)
    return ScenarioSpec(id=sid, script=resolved, params=MappingProxyType(dict(params)),
                        settings=settings)


# The keys that set a run's length; without any, a run has the default time budget.
LENGTH_KEYS = ("iterations", "max_iterations", "budget")


def length_in(raw: Any) -> bool:
    """Whether a settings mapping as written sets a run's length."""
    return isinstance(raw, dict) and any(
        isinstance(k, str) and k.replace("-", "_") in LENGTH_KEYS for k in raw)


NOT_A_DURATION = "not a duration"


def duration_problem(value: Any) -> str:
    """Why `parse_duration` refused `value`: "must be more than 0", or NOT_A_DURATION."""
    text = str(value).strip().lstrip("-")
    if type(value) in (int, float) or (isinstance(value, str) and _DURATION.match(text)):
        return "must be more than 0"
    return NOT_A_DURATION


def parse_duration(value: Any) -> float | None:
    if type(value) in (int, float) and value > 0:
        return float(value)
    if isinstance(value, str) and (m := _DURATION.match(value)):
        scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
        seconds = float(m.group(1)) * scale
        return seconds if seconds > 0 else None
    return None


def parse_settings(ctx: Ctx, value: Any, path: PathKey, base: RunSettings) -> RunSettings:
    raw = ctx.mapping(value or {}, path, SETTING_KEYS)
    changes: dict[str, Any] = {}
    for key, v in raw.items():
        field = key.replace("-", "_")
        here = (*path, key)
        if field == "timeout":
            changes[field] = ctx.duration(v, here, "write e.g. 90s, 20m, 1h or 600")
        elif field == "budget":
            changes[field] = ctx.duration(v, here, "write e.g. 5s, 30s, 2m or 10")
        elif field == "sample_interval":
            if type(v) not in (int, float) or not 0.01 <= v <= 3600:
                raise ctx.fail(here, "must be a number of seconds between 0.01 and 3600")
            changes[field] = float(v)
        elif field in ("iterations", "warmup", "sample_every", "repeats", "min_iterations",
                       "max_iterations", "rounds", "overrun"):
            low = {"warmup": 0, "repeats": 0, "rounds": 0, "overrun": 2}.get(field, 1)
            if type(v) is not int or v < low:
                raise ctx.fail(here, f"must be an integer >= {low}, got {v!r}", "write a whole "
                               f"number, e.g. {key}: {getattr(RunSettings(), field) or 4}")
            changes[field] = v
        elif field in ("pythonmalloc", "network"):
            if not isinstance(v, bool):
                raise ctx.fail(here, f"must be true or false, got {v!r}")
            changes[field] = v
        elif field == "heap":
            if v not in HEAP_MODES:
                raise ctx.fail(here, f"must be one of {', '.join(HEAP_MODES)}, got {v!r}",
                               "heap: quiet (the default) reads the heap after "
                               "gc.collect() with glibc's tcache off; heap: stock as the "
                               "scenario leaves it")
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
    fixed_beside_early_stop(ctx, raw, path, base)
    if result.budget is not None and result.max_iterations is None:
        # A time budget is early stop's length: the calls are only capped.
        result = dataclasses.replace(result, max_iterations=BUDGET_CAP)
    if result.max_iterations is not None and result.max_iterations < result.min_iterations:
        raise ctx.fail(path, f"max_iterations ({result.max_iterations}) is below "
                       f"min_iterations ({result.min_iterations})",
                       "raise max_iterations or lower min_iterations")
    return result


# Checks across a scenario's settings keys.
def fixed_beside_early_stop(ctx: Ctx, raw: dict[str, Any], path: PathKey,
                            base: RunSettings) -> None:
    """Refuse `iterations` beside `budget` or `max_iterations`: early stop never reads it.

    Raises:
        SpecError: naming the `iterations` key.
    """
    given = [k for k in raw if k.replace("-", "_") == "iterations"]
    if not given or not ctx.check_files:    # a results directory's copy ran as it was
        return
    here = (*path, given[0])
    for key, runs, keep, mode, move in _EARLY_STOP_KEYS:
        if any(k.replace("-", "_") == key for k in raw):
            raise ctx.fail(here, f"iterations beside {key}: {runs} and never reads "
                           "iterations", f"keep one: {keep}, or iterations for a fixed length")
        if (set_above := getattr(base, key)) is not None:
            shown = f"{set_above:g}s" if key == "budget" else str(set_above)
            raise ctx.fail(here, f"iterations under {mode} set above ({key}: {shown} in "
                           "defaults), which never reads it", move)


# Early stop's keys: what it runs, which to keep, its name, where to move it (budget
# first: beside it max_iterations is only the cap).
_EARLY_STOP_KEYS = (
    ("budget", "a budget runs for its seconds (max_iterations the cap)",
     "budget for a run of so many seconds", "a time budget",
     "set budget here instead, or move budget out of defaults"),
    ("max_iterations", "early stop (max_iterations) runs up to max_iterations calls",
     "max_iterations for early stop", "an early stop",
     "set max_iterations here instead, or move max_iterations out of defaults into the "
     "scenarios that stop early"),
)


def timeout_past_budget(ctx: Ctx, overrides: dict[str, Any], path: PathKey,
                        settings: RunSettings) -> None:
    """Refuse a timeout within the run's time budget: the budget's calls alone run that
    long, so every cell would be killed.

    Raises:
        SpecError: at the timeout where it is written (else at the budget), with both.
    """
    budget = settings.run_budget
    if budget is None or settings.timeout > budget or not ctx.check_files:
        return
    keys = ("timeout", "budget")
    here = next(((*where, key) for key in keys for where, raw in (
        (path, overrides), (("defaults",), ctx.doc.data.get("defaults"))) if
        isinstance(raw, dict) and key in raw), ("defaults",))
    said = "set" if settings.budget is not None else "the default"
    raise ctx.fail(here, f"timeout {settings.timeout:g}s is within the run's time budget "
                   f"({budget:g}s, {said}): the budget's calls alone run that long, its "
                   "start, setup and warm-up on top, so every cell would be killed at its "
                   "deadline", f"raise timeout: well above the budget (e.g. timeout: "
                   f"{max(20 * 60, 4 * budget):g}s), or lower budget:")


# A pin whose operator is mistyped (`pkg=1.0`, `pkg=>1.0`, `pkg<>1.0`).
_MISTYPED = re.compile(rf"^(?P<name>{NAME}(?:\[[^\]]*\])?)\s*(?P<op>=>|=<|<>|=(?![=<>~]))"
                       r"\s*(?P<version>[0-9][^\s,;]*)$")
_MEANT = {"=": "==", "=>": ">=", "=<": "<=", "<>": "!="}
# A name and its version comparisons (up to a marker), each checked alone.
_COMPARED = re.compile(rf"^\s*(?P<name>{NAME})\s*(?:\[[^\]]*\])?\s*(?P<spec>[=!~<>][^;]*)"
                       r"(?:;.*)?$")
_OPERATORS = ("===", "==", "!=", "~=", "<=", ">=", "<", ">")
_COMPARISON = re.compile(r"^\s*(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9][A-Za-z0-9.*+!_-]*\s*$")


def pin_mistake(pins: list[str]) -> tuple[int, str, str] | None:
    """(index, problem, fix) of the first pin pip would refuse (a mistyped operator, a
    comparison without a version), so it is a matrix error at its line, before any venv
    is built; None if all pins read."""
    for at, pin in enumerate(pins):
        if (found := _MISTYPED.match(pin.strip())) is not None:
            return at, (f"{pin!r}: {found['op']!r} is not a version comparison (pip would "
                        "refuse it when the venv is built)"), (
                f"write {found['name']}{_MEANT[found['op']]}{found['version']}")
        if (head := _COMPARED.match(pin)) is None:
            continue
        bad = next((part.strip() for part in head["spec"].split(",")
                    if not _COMPARISON.match(part)), None)
        if bad is not None:
            has = next((op for op in _OPERATORS if bad == op), None)
            return at, (f"{pin!r}: " + (f"{has!r} has no version after it" if has else
                                        f"{bad!r} is no version comparison") +
                        " (pip would refuse it when the venv is built)"), (
                f"write {head['name']}==VERSION (or >=, <, ~=, !=, comma-separated), or "
                f"{head['name']} alone for its newest release")
    return None
