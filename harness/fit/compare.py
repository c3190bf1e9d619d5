"""`harness compare` over `harness fit` directories: both sides' boundaries, side by side.

A fit directory (`<out>/<name>/fit-<param>`) holds `fit.json`: per image x (host x) GPU
x scenario, the largest value that ran and the memory per unit. Two directories (two
hosts' fits of one matrix), or one fit over a `hosts:` matrix split by host, are joined
on (image, scenario, GPU); a boundary lower than the other side's by more than one step
is marked, and makes the exit code 1, as a bad cell does in a verdict comparison.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness.errors import EXIT_OK, EXIT_REGRESSION, InputError

Row = dict[str, Any]


def fit_rows(path: Path) -> list[Row] | None:
    """The rows of a fit directory's fit.json; None when it is not a fit directory.

    Raises:
        InputError: a fit.json that cannot be read.
    """
    file = path / "fit.json"
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        rows = data["rows"]
        assert isinstance(rows, list)
    except (OSError, ValueError, KeyError, AssertionError, TypeError) as exc:
        raise InputError(f"{file}: not a fit.json harness wrote ({exc}); run `harness fit` "
                         "again") from exc
    return [r for r in rows if isinstance(r, dict)]


def per_unit(row: Row, param: str) -> str:
    """The memory line that predicts the boundary ("rss_anon 47.4 MiB per batch")."""
    pred = row.get("prediction") or {}
    source = pred.get("source") if isinstance(pred, dict) else None
    line = (row.get("memory") or {}).get(source) if source else None
    if not isinstance(line, dict):
        return "-"
    value = line.get("per_unit")
    return f"{source} {value / 2**20:.1f} MiB per {param}" if isinstance(value, int | float) \
        else "-"


@dataclass(frozen=True)
class FitComparison:
    """Two sides' boundaries joined on (image, scenario, GPU): the table's lines, each
    difference in words, the rows as JSON, and whether B fits less than A anywhere."""

    names: tuple[str, str]
    param: str
    table: list[list[object]]
    said: list[str]
    rows: list[dict[str, object]]
    worse: bool

    @property
    def exit_code(self) -> int:
        """1 when B fits less than A beyond one step."""
        return EXIT_REGRESSION if self.worse else EXIT_OK

    def to_json(self) -> dict[str, object]:
        return {"a": self.names[0], "b": self.names[1], "param": self.param,
                "rows": self.rows, "differences": self.said}

    def text(self) -> str:
        a, b = self.names
        return (tabulate(self.table, headers=["", "image", "scenario", "gpu", f"{a} fits",
                                              f"{b} fits", f"{a} memory", f"{b} memory"],
                         tablefmt="simple") + "\n\n"
                + ("\n".join(self.said) if self.said else
                   "the same boundary on both sides (within one step)") + "\n")


def compare_fits(a: list[Row], b: list[Row], names: tuple[str, str],
                 param: str) -> FitComparison:
    """The two sides' boundaries side by side.

    Raises:
        InputError: the two share no (image, scenario, GPU).
    """
    def key(r: Row) -> tuple[str, str, str]:
        return (str(r.get("image")), str(r.get("scenario")), str(r.get("gpu")))

    left, right = {key(r): r for r in a}, {key(r): r for r in b}
    joined = [k for k in left if k in right]
    if not joined:
        raise InputError(f"{names[0]} and {names[1]} share no (image, scenario, GPU): "
                         "nothing to compare\n  fix: fit the same matrix on both hosts")
    table: list[list[object]] = []
    said: list[str] = []
    rows: list[dict[str, object]] = []
    worse = False
    for k in sorted(joined):
        fa, fb = left[k].get("max_fit"), right[k].get("max_fit")
        smaller = isinstance(fa, int) and (not isinstance(fb, int) or fb < fa - 1)
        larger = isinstance(fb, int) and (not isinstance(fa, int) or fa < fb - 1)
        worse = worse or smaller
        mark = "*" if smaller or larger else ""
        rows.append({"image": k[0], "scenario": k[1], "gpu": k[2], "a_fits": fa, "b_fits": fb,
                     "differs": bool(mark), "smaller": smaller})
        table.append([mark, k[0], k[1], k[2], fa if fa is not None else "none fits",
                      fb if fb is not None else "none fits",
                      per_unit(left[k], param), per_unit(right[k], param)])
        if smaller or larger:
            said.append(f"{k[1]} with {k[0]} on {k[2]}: fits {param}={fa} on {names[0]}, "
                        f"{fb} on {names[1]}")
    return FitComparison(names, param, table, said, rows, worse)


def param_of(path: Path) -> str:
    try:
        data = json.loads((path / "fit.json").read_text(encoding="utf-8"))
        return str(data.get("param") or "value")
    except (OSError, ValueError):
        return "value"
