"""Matrix axes x exclude/include -> Cells with stable ids, and the `-k EXPR` selection of
them (pure)."""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.matrixfile.entries import Ctx, parse_image, parse_scenario
from harness.matrixfile.model import (
    DEFAULT_RUNTIME,
    LOCAL_HOST,
    Cell,
    GpuSel,
    Host,
    ImageSpec,
    RunSettings,
    ScenarioSpec,
)

AXES = ("image", "gpu", "scenario")


def cell_id(image: ImageSpec, gpu: GpuSel, scenario: ScenarioSpec,
            host: Host = LOCAL_HOST) -> str:
    base = f"{image.label}.{gpu.label}.{scenario.id}"
    return base if host is LOCAL_HOST else f"{host.label}.{base}"


def dated_cell(cell: Cell, day: str) -> Cell:
    """The row's cell on its image entry as of `day` (`NAME@DAY`)."""
    name = cell.image.label.rpartition("@")[0] or cell.image.label
    image = dataclasses.replace(cell.image, label=f"{name}@{day}", as_of=day)
    return dataclasses.replace(cell, image=image,
                               id=cell_id(image, cell.gpu, cell.scenario, cell.host))


def across_hosts(cells: tuple[Cell, ...], hosts: tuple[Host, ...]) -> tuple[Cell, ...]:
    """Every cell once per host (one host: unchanged ids)."""
    if hosts == (LOCAL_HOST,):
        return cells
    return tuple(dataclasses.replace(c, host=h, id=cell_id(c.image, c.gpu, c.scenario, h))
                 for h in hosts for c in cells)


def _match_image(pattern: Any, image: ImageSpec) -> bool:
    pat = str(pattern)
    return any(fnmatch.fnmatchcase(v, pat) for v in (image.label, image.ref))


def _match_gpu(pattern: Any, gpu: GpuSel) -> bool:
    return str(pattern) in (gpu.value, gpu.label)


def _match_scenario(pattern: Any, scenario: ScenarioSpec) -> bool:
    pat = str(pattern)
    return fnmatch.fnmatchcase(scenario.id, pat) or fnmatch.fnmatchcase(
        scenario.script.as_posix(), pat) or scenario.script.as_posix().endswith("/" + pat)


def expand(ctx: Ctx, images: tuple[ImageSpec, ...], gpus: tuple[GpuSel, ...],
           scenarios: tuple[ScenarioSpec, ...], exclude: Any, include: Any, base: Path,
           defaults: RunSettings, runtime: str = DEFAULT_RUNTIME) -> tuple[Cell, ...]:
    """Cross the axes, drop excludes (each must match something), add includes.

    Raises:
        SpecError: an exclude/include entry is malformed or an exclude matches nothing.
    """
    cells = [Cell(cell_id(i, g, s), i, g, s) for i in images for g in gpus for s in scenarios]
    if not isinstance(exclude, list):
        raise ctx.fail(("exclude",), "exclude must be a list of mappings")
    for n, entry in enumerate(exclude):
        path = ("exclude", n)
        rule = ctx.mapping(entry, path, AXES)
        if not rule:
            raise ctx.fail(path, "an empty exclude would drop every cell")

        def hit(cell: Cell, rule: dict[str, Any] = rule) -> bool:
            return (("image" not in rule or _match_image(rule["image"], cell.image))
                    and ("gpu" not in rule or _match_gpu(rule["gpu"], cell.gpu))
                    and ("scenario" not in rule or _match_scenario(rule["scenario"],
                                                                   cell.scenario)))

        kept = [c for c in cells if not hit(c)]
        if len(kept) == len(cells):
            raise ctx.fail(path, f"exclude {rule} matches no cell",
                           "patterns match image labels/refs, GPU values and scenario ids; "
                           "remove the entry or fix the pattern")
        cells = kept
    if not isinstance(include, list):
        raise ctx.fail(("include",), "include must be a list of mappings")
    for n, entry in enumerate(include):
        path = ("include", n)
        rule = ctx.mapping(entry, path, AXES)
        if "image" not in rule or "scenario" not in rule:
            raise ctx.fail(path, "an include names at least `image` and `scenario`",
                           "write e.g. {image: REPO:TAG, scenario: SCENARIO_ID}")
        image = next((i for i in images if _match_image(rule["image"], i)), None)
        if image is None:
            image = parse_image(ctx, rule["image"], (*path, "image"),
                                runtime, len(images) + n)
        scenario = next((s for s in scenarios if rule["scenario"] in (s.id,)), None)
        if scenario is None:
            scenario = parse_scenario(ctx, rule["scenario"], (*path, "scenario"), base, defaults)
        gpu = gpus[0]
        if "gpu" in rule:
            gpu = next((g for g in gpus if _match_gpu(rule["gpu"], g)), None) or GpuSel(
                str(rule["gpu"]))
        cell = Cell(cell_id(image, gpu, scenario), image, gpu, scenario)
        if all(c.id != cell.id for c in cells):
            cells.append(cell)
    if not cells:
        raise ctx.fail(("matrix",), "the matrix expands to no cells",
                       "check `exclude:`; it removed every combination")
    return tuple(cells)


# `-k EXPR` selection of cells, as pytest does: substrings joined by and/or/not.
_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")
Pred = Callable[[str], bool]


def _either(a: Pred, b: Pred) -> Pred:
    return lambda s: a(s) or b(s)


def _both(a: Pred, b: Pred) -> Pred:
    return lambda s: a(s) and b(s)


def compile_expr(expr: str) -> Pred:
    """Compile `-k` text into a predicate over cell ids.

    Raises:
        InputError: the expression does not parse.
    """
    tokens = _TOKEN.findall(expr)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise InputError(f"-k {expr!r}: unexpected end of expression")
        pos += 1
        return str(tokens[pos - 1])

    def chain(word: str, operand: Callable[[], Pred], join: Callable[[Pred, Pred], Pred]) -> Pred:
        left = operand()
        while peek() == word:
            take()
            left = join(left, operand())
        return left

    def p_or() -> Pred:
        return chain("or", p_and, _either)

    def p_and() -> Pred:
        return chain("and", p_not, _both)

    def p_not() -> Pred:
        if peek() == "not":
            take()
            inner = p_not()
            return lambda s: not inner(s)
        return atom()

    def atom() -> Pred:
        tok = take()
        if tok == "(":
            inner = p_or()
            if take() != ")":
                raise InputError(f"-k {expr!r}: expected ')'")
            return inner
        if tok in (")", "and", "or", "not"):
            raise InputError(f"-k {expr!r}: unexpected {tok!r}")
        word = tok.lower()
        return lambda s: word in s.lower()

    if not tokens:
        return lambda s: True
    pred = p_or()
    if pos != len(tokens):
        raise InputError(f"-k {expr!r}: unexpected {tokens[pos]!r}")
    return pred


def select(cells: Sequence[Cell], expr: str | None) -> list[Cell]:
    """Cells whose id matches `expr`.

    Raises:
        InputError: bad expression, or it selects nothing.
    """
    if not expr:
        return list(cells)
    pred = compile_expr(expr)
    chosen = [c for c in cells if pred(c.id)]
    if not chosen:
        ids = ", ".join(c.id for c in cells[:8])
        raise InputError(f"-k {expr!r} selects no cell; cell ids look like: {ids}")
    return chosen
