"""One report model built from cell results; every renderer reads only this, plus the
small text helpers the renderers share (`md`, `steps_vs_baseline`).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO, TypeVar, cast

from harness.analysis.kinds import BAD, CRASH, UNAVAILABLE, UNDECIDED
from harness.analysis.records import VsBaseline, human_seconds
from harness.answers.kept import (
    Cause,
    Culprit,
    Explanation,
    causes_holding,
    culprits_holding,
    explanations_holding,
    load_causes,
    load_culprits,
    load_explanations,
    results_json,
)
from harness.answers.search import RowAnswer, answer_rows
from harness.protocol.ingest import frames
from harness.result.codec import JSON, encode, parse
from harness.result.model import CellResult, Planned, cell_numbers, cell_text, image_places
from harness.store.results import SeriesCache
from harness.store.resultsjson import Lines, Stamp, results_line_of

__all__ = ["LARGE", "RESULTS_SCHEMA", "Report", "Reporter", "cell_text", "human_seconds", "md",
           "steps_vs_baseline"]

RESULTS_SCHEMA = 2
# Above this many cells a report is read by its rows' answers (`grid.runs`, `paged`).
LARGE = 2000


@dataclass(frozen=True)
class Report:
    name: str
    images: list[str]
    rows: list[RowAnswer]
    results: dict[str, CellResult]
    meta: dict[str, JSON]
    root: Path | None = None        # the results directory: samples.jsonl for plots
    series: SeriesCache = field(default_factory=lambda: SeriesCache(None), compare=False)
    planned: tuple[Planned, ...] = ()           # the sweep's plan, where it was kept
    unreadable: dict[str, str] = field(default_factory=dict)   # cell id -> why
    # `harness explain`: cell id -> where its memory or time went (cells/<id>/where.json)
    explained: dict[str, Explanation] = field(default_factory=dict)
    # cell id -> its result.json's stamp: results.json copies that file, not re-encodes
    stored: Mapping[str, Stamp] = field(default_factory=dict, compare=False)
    # row -> "stale: ..." for explanations no longer resting on the row's cells
    stale_where: dict[str, str] = field(default_factory=dict)
    # `harness culprit`: row -> which package change did it (culprit/<row>/culprit.json)
    culprits: dict[str, Culprit] = field(default_factory=dict)
    # `harness sweep --find-cause`: row -> its summary (cause/<row>.json), or a stale note
    causes: dict[str, Cause] = field(default_factory=dict)
    # cell id -> (its numbers, the cell in words): made once for every renderer
    _said: dict[str, tuple[str, str]] = field(default_factory=dict, compare=False,
                                              repr=False)
    _table: list[tuple[list[str], list[list[str]]]] = field(
        default_factory=list, compare=False, repr=False)     # `table()`, once made

    @classmethod
    def from_results(cls, name: str, results: Mapping[str, CellResult],
                     meta: Mapping[str, JSON] | None = None, root: Path | None = None,
                     series: SeriesCache | None = None, planned: Sequence[Planned] = (),
                     unreadable: Mapping[str, str] | None = None,
                     stored: Mapping[str, Stamp] | None = None,
                     outdated: Collection[str] = ()) -> Report:
        """Build the model.

        Series come from `series` (the sweep's), else `root`'s samples.jsonl. Cells of `planned`
        without a result are "not run" (or unreadable); no first bad is named across them.
        `stored`: result.json stamps as read; `outdated`: unreadable cells shown as stale."""
        order = image_places(results, planned)
        images = sorted(order, key=order.__getitem__)
        gone = dict(unreadable or {})
        explained, stale = explanations_holding(load_explanations(root) if root is not None else {},
                                   results, planned, gone, root)
        return cls(name, images, answer_rows(results, planned, gone, outdated), dict(results),
                   dict(meta or {}), root, series or SeriesCache(root), tuple(planned), gone,
                   explained, {k: v for k, v in (stored or {}).items() if k in results},
                   stale, culprits_holding(load_culprits(root) if root is not None else {},
                                           results, root),
                   causes_holding(load_causes(root) if root is not None else {}, results,
                                  root, planned, gone))

    def numbers_of(self, cid: str) -> str:
        """The cell's key numbers (`result.model.cell_numbers`); "" for no result."""
        return self._words(cid)[0]

    def text_of(self, cid: str) -> str:
        """The cell in words (`result.model.cell_text`); "" for no result."""
        return self._words(cid)[1]

    def _words(self, cid: str) -> tuple[str, str]:
        found = self._said.get(cid)
        if found is None:
            res = self.results.get(cid)
            numbers = cell_numbers(res) if res is not None else ""
            found = ("", "") if res is None else (numbers, cell_text(res, numbers))
            self._said[cid] = found
        return found

    def cause_lines(self, row: str) -> list[str]:
        """What `--find-cause` found for the row; empty when not run there."""
        found = self.causes.get(row)
        return found.lines() if found is not None else []

    def culprit_lines(self, row: str) -> list[str]:
        """What `harness culprit` answered for the row; empty when not run there."""
        found = self.culprits.get(row)
        return found.lines() if found is not None else []

    def where_lines(self, cell_id: str) -> list[str]:
        """What `harness explain` found for the cell; empty when not explained."""
        ex = self.explained.get(cell_id)
        if ex is None:
            return []
        return [*(ex.diff or ex.summary), *ex.notes]

    @property
    def large(self) -> bool:
        """Past LARGE cells, planned or run: read by its rows' answers."""
        return max(len(self.results), len(self.planned)) > LARGE

    @property
    def missing_cells(self) -> list[str]:
        """Planned cells with no readable result: not run (interrupted) or unreadable."""
        return sorted({p.id for p in self.planned if p.id not in self.results}
                      | set(self.unreadable))

    @property
    def undecided_cells(self) -> list[str]:
        """Cells that ran but were neither good nor bad: run longer to decide them."""
        return sorted(k for k, r in self.results.items() if r.verdict in UNDECIDED)

    def crash_frames(self, depth: int = 3) -> dict[str, list[str]]:
        """Cell id -> the last frames of its scenario's error, for crashed cells."""
        out: dict[str, list[str]] = {}
        for cid, res in sorted(self.results.items()):
            err = res.end.error
            if res.verdict != CRASH or err is None or not err.traceback:
                continue
            kept = [str(f) for f in frames(err.traceback)]
            if kept:
                out[cid] = kept[-depth:]
        return out

    def incomplete_note(self) -> str | None:
        """The line a reader must not miss when the answer is not a whole one."""
        missing, undecided = self.missing_cells, self.undecided_cells
        if not missing and not undecided:
            return None
        parts = []
        if missing:
            parts.append(f"{len(missing)} of {len(self.planned) or len(missing)} planned "
                         f"cells missing ({', '.join(missing)})")
        if undecided:
            parts.append(f"{len(undecided)} cell{'s' if len(undecided) != 1 else ''} "
                         f"undecided ({', '.join(undecided)})")
        return "not a complete answer: " + "; ".join(parts)

    @property
    def bad_cells(self) -> list[str]:
        return sorted(k for k, r in self.results.items() if r.verdict in BAD)

    @property
    def broken_scenarios(self) -> list[str]:
        """Rows whose scenario fails the same way, or times out, on every image."""
        return [r.row for r in self.rows if r.scenario_error is not None]

    @property
    def findings(self) -> list[str]:
        """Bad cells, less those of rows where the scenario itself is broken."""
        broken = set(self.broken_scenarios)
        return [k for k in self.bad_cells if self.results[k].row not in broken]

    @property
    def unavailable_cells(self) -> list[str]:
        return sorted(k for k, r in self.results.items() if r.verdict == UNAVAILABLE)

    def unavailable_notes(self) -> list[str]:
        """One line per image (and host) that could not be prepared, with the reason."""
        seen: dict[str, str] = {}
        for cid in self.unavailable_cells:
            res = self.results[cid]
            seen.setdefault(res.image.label, res.outcome.error or res.reason)
        return [f"{label}: {text}" for label, text in seen.items()]

    def table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows: GPU x scenario down, images across, then the answer."""
        if not self._table:
            self._table.append(self._made_table())
        header, body = self._table[0]
        return list(header), [list(line) for line in body]

    def _made_table(self) -> tuple[list[str], list[list[str]]]:
        header = ["row", *self.images, "first bad / last good"]
        body: list[list[str]] = []
        for row in self.rows:
            by_image = {label: cid for label, _, cid in row.cells}
            cells = []
            said = {label: verdict for label, verdict, _ in row.cells}
            for img in self.images:
                cid = by_image.get(img)
                if cid is None:
                    cells.append("")
                    continue
                res = self.results.get(cid)
                cells.append(self.text_of(cid) if res is not None else said[img])
            body.append([row.row, *cells, row.sentence])
        return header, body

    def table_verdicts(self) -> list[list[str]]:
        """The verdict behind each image cell of `table()` ("" where none)."""
        out = []
        for row in self.rows:
            said = {label: (verdict, cid) for label, verdict, cid in row.cells}
            line = []
            for img in self.images:
                verdict, cid = said.get(img, ("", ""))
                res = self.results.get(cid)
                line.append(str(res.verdict) if res is not None else verdict)
            out.append(line)
        return out

    def _cell_line(self, cell_id: str, result: CellResult, lines: Lines | None = None
                   ) -> str:
        """A cell's line of results.json: from `lines`, else its file's text, else encoded."""
        stamp = self.stored.get(cell_id)
        if stamp is not None and lines is not None:
            kept = lines.line(cell_id, stamp)
            if kept is not None:
                return kept.decode("utf-8")
        line = (results_line_of(self.root, cell_id, stamp)
                if stamp is not None and self.root is not None else None)
        if line is None:    # an older schema, or changed since it was read
            return json.dumps(result.to_json(host_samples=False), sort_keys=True, default=str)
        return line

    def cells_parts(self, lines: Lines | None = None,
                    placed: dict[str, tuple[int, int, int]] | None = None) -> Iterator[str]:
        """results.json's "cells" object a line at a time, never held whole; `placed`
        gets each line's offset, length and CRC-32, for results.index."""
        yield "{"
        at = 1
        for n, (k, v) in enumerate(sorted(self.results.items())):
            key = f"{', ' if n else ''}{json.dumps(k)}: "
            yield key
            line = self._cell_line(k, v, lines)
            if placed is not None:
                raw = line.encode("utf-8")
                at += len(key.encode("utf-8"))
                placed[k] = (at, len(raw), zlib.crc32(raw))
                at += len(raw)
            yield line
        yield "}"

    def to_json(self, cells: bool = True) -> dict[str, JSON]:
        """results.json's content; without `cells`, all but them (`cells_parts`)."""
        out: dict[str, JSON] = {
            "schema": RESULTS_SCHEMA, "name": self.name, "meta": self.meta,
            "images": list(self.images), "rows": [encode(r) for r in self.rows],
            "bad_cells": list(self.bad_cells),
            "missing_cells": list(self.missing_cells),
            "undecided_cells": list(self.undecided_cells),
            "culprits": {row: {"status": c.status, "sentence": c.sentence,
                               "probes": list(c.probes)}
                         for row, c in sorted(self.culprits.items())},
            "causes": results_json(self.causes)}
        if cells:
            out["cells"] = {k: parse(self._cell_line(k, v).encode())
                            for k, v in sorted(self.results.items())}
        return out


R = TypeVar("R", bound="Reporter")


class Reporter:
    """A renderer over one Report, reading only it: `Kind.from_results(r).render(out)`."""

    def __init__(self, report: Report):
        self.report = report

    @classmethod
    def from_results(cls: type[R], report: Report) -> R:
        return cls(report)

    def render(self, out: TextIO) -> None:
        """Write this rendering of the report to `out`."""
        raise NotImplementedError(f"{type(self).__name__} does not render")


# A name Python gives code in angle brackets (`step.<locals>.<genexpr>`): shown as code.
PY_ANGLED = re.compile(r"[^\s`|<>]*(?:<(?:locals|genexpr|lambda|module|listcomp|dictcomp|"
                       r"setcomp|string|stdin)>[^\s`|<>]*)+")
TRAILING = ",;:.)]"


def _code(m: re.Match[str]) -> str:
    token = m.group(0)
    kept = token.rstrip(TRAILING)
    lead = "(" if kept.startswith("(") else ""
    return f"{lead}`{kept[len(lead):]}`{token[len(kept):]}"


def md(text: object) -> str:
    """`text` safe in a Markdown table cell; a Python `<name>` becomes a code span."""
    said = str(text).replace("|", "\\|").replace("\n", " ")
    if "<" not in said:     # no raw HTML and no angled name: the common, fast path
        return said
    parts = cast("list[str]", PY_ANGLED.split(said))     # no capturing group: no None
    names = [_code(m) for m in PY_ANGLED.finditer(said)]
    out = parts[0].replace("<", "&lt;")
    for name, rest in zip(names, parts[1:], strict=True):
        out += name + rest.replace("<", "&lt;")
    return out


def steps_vs_baseline(vs: VsBaseline) -> str:
    """The step-time ratio against the baseline as far as it is known: the rounds'
    ratio and interval, else the pooled ratio marked unconfirmed (host drift is in it), e.g.
    "1.52x (CI 1.31..1.76) in 3 interleaved rounds (8.2 s), confirmed slower"."""
    conf, steps = vs.confirmation, vs.steps
    if conf is not None:
        n = len(conf.rounds)
        cost = f"{n} interleaved round{'s' if n != 1 else ''}" + (
            f" ({conf.seconds:.1f} s)" if conf.seconds else "")
        if conf.confirmed:
            said = f"confirmed {conf.direction}"
        elif conf.direction != "~":
            said = f"{conf.direction}, not the {conf.suspected} suspected"
        elif conf.suspected != "~":
            said = f"{conf.suspected} not confirmed"
        else:
            said = "no change"
        return f"{conf.interval()} in {cost}, {said}"
    if steps is None:
        return "-"
    pooled = f"{steps.ratio:.2f}x pooled (p={steps.p_value:.2g})"
    if steps.direction == "~":
        # Which threshold held it back is the analysis block's to say; the words do not guess.
        return f"{pooled}, not a change by the pooled test's thresholds"
    return f"{pooled}, suspected {steps.direction}, unconfirmed: no interleaved rounds"
