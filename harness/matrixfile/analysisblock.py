"""A matrix's `analysis:` block (and `--set analysis.KEY=VALUE`) -> `AnalysisConfig`,
every error located as the value was given."""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.errors import SpecError
from harness.matrixfile.entries import Ctx
from harness.matrixfile.yamlsrc import Located, load_text, read_text
from harness.thresholds import SETTABLE, AnalysisConfig

__all__ = ["analysis_block", "analysis_of"]


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
    """The analysis block as settings; a fix line is written as the value was given: a
    YAML key in the file, or `--set analysis.KEY=VALUE` on the command line."""
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
    """A float written in exponent form without a dot (`1e-05`, as Python prints the
    default of `step_floor_s`), which YAML 1.1 reads as a string, as the number it is."""
    if isinstance(v, str):
        try:
            return float(v) if math.isfinite(float(v)) else v
        except ValueError:
            return v
    return v
