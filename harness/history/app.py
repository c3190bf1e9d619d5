"""`harness history`'s work: every run of a matrix read and joined (`model`), the
latest verdicts as one report model, history.html written beside the runs (`page`), the
exit code and the notes; the answer in JSON. `cli.history` parses and prints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.app import answer
from harness.app.command import exit_code
from harness.errors import EXIT_OK, EXIT_UNDECIDED, StoreError, without_out
from harness.history.model import read_history
from harness.history.page import latest_report, write_html
from harness.result.model import cell_text
from harness.store.gate import read_gated

if TYPE_CHECKING:
    from harness.history.model import History
    from harness.report import Report


def history_of(root: Path) -> tuple[History, Report]:
    """The runs under `root` joined, and the report model of their latest verdicts.

    Raises:
        InputError: no run under `root`.
    """
    history = read_history(root)
    return history, latest_report(history)


def written(history: History, report: Report, root: Path) -> Path:
    """history.html beside the runs; its path.

    Raises:
        StoreError: it cannot be written (with the fix that prints it without writing).
    """
    try:
        return write_html(history, report)
    except StoreError as exc:
        raise without_out(exc, f"harness history {root} --no-html prints it "
                               "without writing") from exc


def closing(history: History, report: Report) -> tuple[int, list[str]]:
    """0 when every latest verdict is good; else as `harness report` exits on the
    latest verdicts (1 a bad one, 3 an unavailable one, 4 an undecided or unreadable
    one); 4 too when a run was left out because it does not read. With the notes said
    after the table: the newest run's stale cells, an incomplete run."""
    code = exit_code(report)
    note = report.incomplete_note()
    notes = [*stale_note(history.runs[-1].path), *([f"\n{note}"] if note else [])]
    if code == EXIT_OK and any("does not read" in n for n in history.notes):
        return EXIT_UNDECIDED, notes
    return code, notes


def stale_note(newest: Path) -> list[str]:
    """The newest run's cells made from inputs that have changed since (the gate,
    `store.gate`): a history is of runs as they ran, but its latest verdicts are then
    not the matrix's now; said with the command that runs them again."""
    found, _ = read_gated(newest)
    if not found.stale:
        return []
    return [f"\n{len(found.stale)} cell(s) of the newest run ({newest.name}) ran before "
            f"their inputs changed ({next(iter(found.stale.values()))}); its verdicts are "
            f"not the matrix's now\n  fix: {found.refresh} runs them again"]


def history_json(history: History, report: Report) -> dict[str, object]:
    """history's answer in JSON mode, from what its table is drawn from: the runs, each
    line's latest reading of each image (with its run) and its flaky images, and the
    rows' answers over the latest verdicts (`RowAnswer`s, as results.json keeps them)."""
    lines = []
    for line in history.lines:
        latest = {}
        for image in line.seen:
            s = line.latest(image)
            if s is not None:
                latest[image] = {"run": s.run.tag, "cell": s.cell, "verdict": s.verdict,
                                 "text": cell_text(s.result) if s.result else None,
                                 "why": s.why}
        lines.append({"row": line.row, "host": line.host, "name": line.name,
                      "latest": latest, "flaky": [
                          {"image": f.image, "seen": [{"run": x.run.tag, "verdict": x.verdict}
                                                      for x in f.seen]}
                          for f in line.flaky()]})
    for text in history.notes:
        answer.note(text)
    return {"name": history.name, "dir": str(history.root), "images": list(history.images),
            "runs": [{"tag": r.tag, "name": r.name, "kind": r.kind, "started": r.started,
                      "images": list(r.images), "watch": r.watch} for r in history.runs],
            "lines": lines, "rows": list(report.rows)}
