"""The sweep on a terminal (`sweeping.course.progress_for` chooses it on a TTY):
`LiveProgress`, one bar per running cell, the latest pull or venv-build line per image,
other lines above it. `NO_COLOR` turns colour off."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from harness.protocol.ingest import last_sample
from harness.report.grid import wrap
from harness.thresholds import host_busy

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.progress import TaskID

    from harness.matrixfile.model import Cell
    from harness.result.model import CellResult

RUNNING = re.compile(r"^\[\d+/\d+\] \S+: (?:preparing .*, then )?running\b")
PREPARING = re.compile(r"^(?:pull(?:ing)? (?P<ref>[^\s:]+(?::[^\s:]+)?)|"
                       r"(?P<label>\S+): (?:pip: |building venv|cached venv))")


def no_colour() -> bool:
    return bool(os.environ.get("NO_COLOR"))


def last_iteration(path: Path, chunk: int = 8192
                   ) -> tuple[int, str, float | None] | None:
    """(iterations, phase, the phase's own seconds) from samples.jsonl's last line."""
    record = last_sample(path, chunk)
    if record is None:
        return None
    cell = record.fields.get("cell_s")
    return (int(record.fields["i"]), str(record.fields.get("phase") or ""),
            float(cell) if isinstance(cell, int | float) else None)


def budget_count(done: int, spent: float, cell: float | None, budget: float) -> str:
    """A budgeted cell's calls and budget seconds spent, both clocks where they differ."""
    if cell is None or not host_busy(spent, cell):
        return f"{done:,} calls, {spent:.1f}/{budget:g} s"
    return (f"{done:,} calls, {cell:.1f}/{budget:g} s of the cell's time "
            f"(host busy: took {spent:.0f} s)")


class LiveProgress:
    """A rich live display of the running cells (see the module docstring)."""

    def __init__(self, samples: Callable[[str], Path], console: Console | None = None,
                 refresh_s: float = 0.25):
        self.samples = samples          # cell id -> its samples.jsonl
        self.console = console or Console(stderr=True, no_color=no_colour(),
                                          highlight=False)
        self.bars = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=None),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
            console=self.console, expand=True)
        # cell id -> (bar, first (time, iteration) seen: the rate is measured from there)
        self.tasks: dict[str, tuple[TaskID, list[float]]] = {}
        self.preparing: dict[str, str] = {}
        self.prepare_t: dict[str, float] = {}        # when each image's first line came
        self.images: dict[str, tuple[str, str]] = {}  # cell id -> (image ref, label)
        # A budgeted cell's bar counts budget seconds: cell id -> budget, measure start
        self.budgets: dict[str, float] = {}
        self.measuring: dict[str, float] = {}
        self.totals: dict[str, int] = {}     # cell id -> the calls it runs at most
        self.cell_s: dict[str, float] = {}   # cell id -> its last cell_s (step samples)
        self.lock = threading.RLock()
        self.live = Live(self._view(), console=self.console, refresh_per_second=4,
                         transient=True, redirect_stderr=False, redirect_stdout=False)
        self.live.start()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(refresh_s,), daemon=True,
                                        name="live-display")
        self._thread.start()

    def _view(self) -> RenderableType:
        lines: list[RenderableType] = [
            Text(f"  {v}", style="dim", overflow="ellipsis", no_wrap=True)
            for v in self.preparing.values()]
        return Group(*lines, self.bars)

    def __call__(self, text: str) -> None:
        if RUNNING.match(text):
            return                      # the bar says it
        found = PREPARING.match(text)
        with self.lock:
            if found is not None:
                key = found.group("ref") or found.group("label") or text
                self.preparing[key] = text
                self.prepare_t.setdefault(key, time.monotonic())
                self.live.update(self._view(), refresh=True)
                return
            # Wrapped within the width, so rich redraws the live region below it.
            self.console.print("\n".join(wrap(f"harness: {text}", self.console.width)),
                               markup=False, highlight=False)

    def cell(self, cell: Cell, event: str, result: CellResult | None) -> None:
        s = cell.settings
        with self.lock:
            if event == "running":
                # The cell may still wait for its image: its clock starts at its first sample.
                total = s.warmup + (s.max_iterations or s.iterations)
                self.totals[cell.id] = total
                if (budget := s.run_budget) is not None:
                    total = BUDGET_STEPS
                    self.budgets[cell.id] = budget
                task = self.bars.add_task(_short(cell.id, 40), total=total, rate="",
                                          count="", start=False)
                self.tasks[cell.id] = (task, [])
                self.images[cell.id] = (cell.image.ref, cell.image.label)
                self.live.update(self._view(), refresh=True)
            elif event in ("done", "ended") and cell.id in self.tasks:
                # a cell done before a poll still ends its image's preparing line
                self._prepared(cell.id, time.monotonic(), event == "done")
                task, _ = self.tasks.pop(cell.id)
                for kept in (self.budgets, self.measuring, self.totals, self.cell_s):
                    kept.pop(cell.id, None)
                self.bars.remove_task(task)

    def _poll(self, every: float) -> None:
        while not self._stop.wait(every):
            with self.lock:
                for cid, (task, first) in list(self.tasks.items()):
                    self._update(cid, task, first)

    def _update(self, cid: str, task: TaskID, first: list[float]) -> None:
        got = last_iteration(self.samples(cid))
        if got is None:
            return
        done, phase, cell = got
        if cell is not None:
            self.cell_s[cid] = cell
        now = time.monotonic()
        if not first:
            first += [now, float(done)]
            self.bars.start_task(task)
            self._prepared(cid, now)
        rate = ""
        if now - first[0] > 0.2 and done > first[1]:
            rate = f"{(done - first[1]) / (now - first[0]):,.0f} it/s"
        if phase == "warmup":
            rate = f"{rate} warm-up".strip()
        completed = float(done)
        count = f"{done:,}/{self.totals.get(cid, 0):,} it"
        if (budget := self.budgets.get(cid)) is not None:
            if phase == "measure":
                self.measuring.setdefault(cid, now)
            spent = now - self.measuring.get(cid, now)
            cell = self.cell_s.get(cid) if phase == "measure" else None
            completed = min(BUDGET_STEPS - 1, BUDGET_STEPS * (
                spent if cell is None else cell) / budget)
            count = budget_count(done, spent, cell, budget)
        self.bars.update(task, completed=completed, rate=rate, count=count)

    def _prepared(self, cid: str, now: float, built: bool = True) -> None:
        """The cell's image is ready: its preparing line says how long the build took."""
        for key in self.images.pop(cid, ()):
            text = self.preparing.pop(key, None)
            started = self.prepare_t.pop(key, None)
            if built and text is not None and started is not None \
                    and "cached venv" not in text:
                self.console.print(f"harness: {key}: built in {now - started:.1f} s",
                                   markup=False, highlight=False)
        self.live.update(self._view(), refresh=True)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        with self.lock:      # Ctrl-C or the end: no "building" line is left behind
            self.preparing.clear()
            self.live.update(self._view(), refresh=True)
        self.live.stop()


BUDGET_STEPS = 1000     # a budgeted cell's bar: thousandths of its budget


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
