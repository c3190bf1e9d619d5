"""A model of what users do, in any order, held to one truth (issue 35 item 6).

`UserPaths` is a hypothesis `RuleBasedStateMachine`. Its world is a matrix of four
images (pinned `demo==N`) by two scenarios, swept over `FakeRuntime`, whose truth is
stated here: a cell is bad (it leaks) when its pin is at least the scenario's threshold,
which the scenario file (`THRESHOLD = n`) and, for `s.py`, the helper module it imports
(`SHIFT = n`) set. The runtime reads them when the cell runs, as a container would.

The rules are what a user does: sweep, `--resume`, Ctrl-C at a random call, edit a pin,
the scenario, its helper module or `iterations`, `report`, `report --reanalyze` with and
without `--set`, `explain`, `culprit` (and its --good/--bad mistakes), `report --issue`,
`compare`, `history`, cut a `result.json` or a `samples.jsonl` short, copy a results
directory, edit the scenario with no resume and run each command, sweep a second matrix
file of the same `name:` with `--resume` (issue 42). Every command goes through
`harness.cli.main(argv)` in this process.

A cell measured under scenario inputs that have changed since is stale (`stale`): the
gate (`harness.store.gate`) reads it as a gap, so every answer is held to the cells that
are current, and a stale cell must be named as stale with the command that runs it
again, which the model runs (`run_fix`).

After every step the answers a command printed (each row's first bad and last good,
every cell's verdict, the exit code, explain's where) must equal what the model computes
from the truth each cell was measured under (a fresh sweep: the truth now), or the
command must say the answer is incomplete or stale; no traceback; every exit code in the
README's table; a command writes only where it says it does.

Left out, with the reason: a closed pipe (the "paths" branch of issue 35 owns it).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import signal
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from unittest import mock

from fakeruntime import Behaviour, FakeRuntime
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from harness.cli import main
from harness.matrixfile.model import Cell

EXIT_CODES = {0, 1, 2, 3, 4, 130}
IMAGES = ("v1", "v2", "v3", "v4")
ROWS = ("cpu.s", "cpu.t")
STALE = "stale: the cells changed since"


# ------------------------------------------------------------------ the stated truth
def pin_of(cell: Cell) -> int:
    [pin] = cell.image.pip
    return int(pin.split("==")[1])


def number(path: Path, name: str) -> int:
    found = re.search(rf"^{name} = (\d+)$", path.read_text(), re.M)
    assert found is not None, path
    return int(found.group(1))


def truth(cell: Cell) -> bool:
    """The cell is bad (it leaks): read from the files as the run finds them."""
    script = cell.scenario.script
    limit = number(script, "THRESHOLD")
    if cell.scenario.id == "s":
        limit += number(script.with_name("helper.py"), "SHIFT")
    return pin_of(cell) >= limit


def behave(cell: Cell) -> Behaviour:
    return Behaviour(leak_per_iter=16384) if truth(cell) else Behaviour()


class Interrupting(FakeRuntime):
    """FakeRuntime that sends this process SIGINT (a user's Ctrl-C) as run `at` starts."""

    def __init__(self, at: int | None) -> None:
        super().__init__(behave)
        self.at = at

    def run(self, request: Any, progress: Any) -> Any:
        if self.at is not None and len(self.runs) + 1 == self.at:
            self.at = None
            signal.raise_signal(signal.SIGINT)
        return super().run(request, progress)


# ------------------------------------------------------------------ the oracle
def oracle(verdicts: dict[str, bool | None]) -> dict[str, tuple[str | None, str | None]]:
    """Per row, (first bad, last good) over images in order, from each cell's class
    (True bad, False good, None unknown: not run, unreadable). The first bad is the
    first bad image after a good one, else the first bad image; none is named across
    an unknown cell between the last good image before it and it."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for row in ROWS:
        line = [(img, verdicts.get(f"{img}.{row}")) for img in IMAGES]
        first = good_before = last_good = None
        for img, bad in line:
            if bad is False:
                last_good = img
            elif bad and first is None and last_good is not None:
                first, good_before = img, last_good
        if first is None:
            first = next((img for img, bad in line if bad), None)
        end = IMAGES.index(first) if first is not None else len(IMAGES)
        start = max([i + 1 for i in range(end) if line[i][1] is False], default=0)
        if any(line[i][1] is None for i in range(start, end)):
            first = good_before = None
        out[row] = (first, good_before)
    return out


def printed(text: str) -> dict[str, list[str]]:
    """The console table: row -> [row, one text per image, the row's answer]."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = re.split(r"\s{2,}", line.strip())
        if parts[0] in ROWS and len(parts) == len(IMAGES) + 2:
            out.setdefault(parts[0], parts)
    assert set(out) == set(ROWS), text
    return out


def cell_id(img: str, row: str) -> str:
    return f"{img}.{row}"


@dataclass
class RunDir:
    """What the model knows of one results directory: each cell's class as measured
    (None: unreadable), the result.json it read then, and what explain rested on."""

    path: Path
    cells: dict[str, bool | None] = field(default_factory=dict)
    seen: dict[str, str] = field(default_factory=dict)      # cell -> result.json sha
    explained: dict[str, str] = field(default_factory=dict)  # cell -> sha explained
    samples_cut: set[str] = field(default_factory=set)
    kind: str = "sweep"         # or "reanalyzed": `report --reanalyze --write` made it
    garbled: set[str] = field(default_factory=set)   # result.json of another shape
    # cell -> the scenario inputs it was measured under (its script's THRESHOLD, and
    # for s.py the helper's SHIFT): a cell whose inputs differ now is stale
    inputs: dict[str, tuple[int, int, int]] = field(default_factory=dict)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


class UserPaths(RuleBasedStateMachine):
    # What the runs walked (sequences, steps, commands), for the test and the benchmark.
    counts: ClassVar[dict[str, int]] = {"sequences": 0, "steps": 0, "commands": 0}

    def seen(self, event: str) -> None:
        """Count a path worth knowing the walk took (a stale note, a Ctrl-C, ...)."""
        self.counts[event] = self.counts.get(event, 0) + 1

    def __init__(self) -> None:
        super().__init__()
        self.counts["sequences"] += 1
        self.counts["steps"] -= 1        # the invariant runs once before the first step
        self.root = Path(tempfile.mkdtemp(prefix="userpaths-"))
        self.pins = [1, 2, 3, 4]
        self.threshold = {"s": 3, "t": 4}
        self.shift = 0
        self.iterations = 300
        self.dirs: list[RunDir] = []
        self.copies = 0
        self.log: list[str] = []
        self.interrupt_at: int | None = None
        self.explained_ok = False
        self.patch = mock.patch("harness.runtimes.get_runtime", self._runtime)
        self.patch.start()
        self.write_files()

    def _runtime(self, name: str, docker_host: str | None = None) -> FakeRuntime:
        at, self.interrupt_at = self.interrupt_at, None
        return Interrupting(at)

    def teardown(self) -> None:
        self.patch.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # -------------------------------------------------------------- files
    @property
    def matrix(self) -> Path:
        return self.root / "m.yaml"

    def write_files(self) -> None:
        images = ", ".join(f"{{name: {img}, pip: [demo=={pin}]}}"
                           for img, pin in zip(IMAGES, self.pins, strict=True))
        self.matrix.write_text(
            "name: paths\nruntime: local\n"
            f"defaults: {{iterations: {self.iterations}, warmup: 10, sample_every: 5, "
            "repeats: 0}\n"
            f"matrix:\n  image: [{images}]\n  gpu: [none]\n  scenario: [s.py, t.py]\n")
        body = "\n\ndef setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
        (self.root / "s.py").write_text(
            f"import helper\n\nTHRESHOLD = {self.threshold['s']}\n{body}")
        (self.root / "t.py").write_text(f"THRESHOLD = {self.threshold['t']}\n{body}")
        (self.root / "helper.py").write_text(f"SHIFT = {self.shift}\n")

    def now(self) -> dict[str, bool | None]:
        """Each cell's class in a fresh sweep of the matrix as it is now."""
        limit = {"s": self.threshold["s"] + self.shift, "t": self.threshold["t"]}
        return {cell_id(img, f"cpu.{sc}"): pin >= limit[sc]
                for img, pin in zip(IMAGES, self.pins, strict=True) for sc in ("s", "t")}

    def inputs_now(self, cid: str) -> tuple[int, int, int]:
        """What the cell reads now: its scenario's THRESHOLD, (s.py) the SHIFT, and its
        image's pin in the matrix file (an edited pin makes its cells stale)."""
        pin = self.pins[IMAGES.index(cid.split(".")[0])]
        if cid.endswith(".cpu.s"):
            return self.threshold["s"], self.shift, pin
        return self.threshold["t"], 0, pin

    def stale(self, run: RunDir) -> set[str]:
        """The cells of `run` made from inputs that have changed since (scenario, helper
        module, pin): the gate (`store.gate`) reads them as stale, never as findings."""
        return {cid for cid, was in run.inputs.items()
                if run.cells.get(cid) is not None and was != self.inputs_now(cid)}

    def known(self, run: RunDir, unknown: Collection[str] = (),
              relaxed: bool = False) -> dict[str, bool | None]:
        """Each cell's class as a command may answer it now: None where unknown,
        unreadable or stale."""
        gone = set(unknown) | self.stale(run)
        return {cid: (None if cid in gone or bad is None else bad and not relaxed)
                for cid, bad in run.cells.items()}

    # -------------------------------------------------------------- running commands
    def cli(self, *argv: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        self.log.append("harness " + " ".join(argv))
        self.counts["commands"] += 1
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                contextlib.chdir(self.root):
            code = main(list(argv))
        text = out.getvalue() + err.getvalue()
        assert "Traceback" not in text, (self.log, text)
        if STALE in text:
            self.seen("stale where")
        assert code in EXIT_CODES, (self.log, code, text)
        return code, text

    def newest(self) -> RunDir | None:
        return self.dirs[-1] if self.dirs else None

    def taken_in(self, run: RunDir, fresh: dict[str, bool | None]) -> None:
        """Cells whose result.json a command wrote are at the truth now."""
        for cid in fresh:
            path = run.path / "cells" / cid / "result.json"
            digest = sha(path)
            if digest and digest != run.seen.get(cid):
                run.cells[cid], run.seen[cid] = fresh[cid], digest
                run.inputs[cid] = self.inputs_now(cid)
                run.samples_cut.discard(cid)
                run.garbled.discard(cid)
            elif not digest and cid in run.seen:
                # A resumed cell that runs again loses its old result first: not run
                # where the run was interrupted before it.
                run.cells[cid], run.seen[cid] = None, ""

    def check_answers(self, run: RunDir, code: int, text: str, *,
                      unknown: Collection[str] = (), written: bool = True,
                      relaxed: bool = False) -> None:
        """The printed table (each cell's verdict, each row's answer), results.json
        where the command wrote it, and the exit code equal the model's answer over
        what `run` recorded."""
        if run.garbled and code == 2:
            # A result.json of another shape is refused as bad input, the file and its
            # key named (the store's rule: `store.results.read_cells`).
            assert any(f"cells/{c}/result.json: " in text for c in run.garbled), (
                self.log, text)
            return
        known = self.known(run, unknown, relaxed)
        for cid in sorted(self.stale(run)):
            # a stale cell is named as such, with the command that runs it again
            assert re.search(rf"{re.escape(cid)}: stale: ", text) or written is False, (
                self.log, cid, text)
            self.seen("stale cell")
        expect = oracle(known)
        table = printed(text)
        for row, (first, good) in expect.items():
            said = table[row]
            answer = said[-1]
            if first is not None and good is not None:
                assert f"first bad: {first} (last good: {good})" in answer, (
                    self.log, row, said, known)
            elif first is not None:
                assert f"bad from the first image ({first})" in answer, (self.log, row, said)
            else:
                assert "first bad:" not in answer and "bad from" not in answer, (
                    self.log, row, said, known)
            for img, cell in zip(IMAGES, said[1:-1], strict=True):
                bad = known.get(cell_id(img, row))
                verdict = cell.split(":")[0]
                if cell_id(img, row) in self.stale(run):
                    assert verdict == "stale", (self.log, row, said)
                elif bad is None:
                    assert verdict in ("unreadable", "not run"), (self.log, row, said)
                else:
                    assert (verdict == "leak") == bad, (self.log, row, said, known)
        if written:
            data = json.loads((run.path / "results.json").read_text())
            rows = {r["row"]: r for r in data["rows"]}
            for row, answer in expect.items():
                got = (rows[row]["first_bad"], rows[row]["last_good"])
                assert got == answer, (self.log, row, rows[row]["sentence"], known)
        findings = any(known.values())
        whole = len(known) == len(IMAGES) * len(ROWS) and None not in known.values()
        assert code == (1 if findings else 0 if whole else 4), (self.log, code, text)
        self.check_where(run, text, expect, written)

    def check_where(self, run: RunDir, text: str,
                    expect: dict[str, tuple[str | None, str | None]], written: bool) -> None:
        """A where shown beside a cell rests on that cell as it is now, and that cell is
        its row's first bad; else the report says it is stale, or says nothing."""
        firsts = {cell_id(first, row) for row, (first, _) in expect.items() if first}
        shown = set(re.findall(r"^where, (\S+) \(first bad\):", text, re.M))
        md = (run.path / "report.md").read_text() if written else ""
        shown |= set(re.findall(r"\*\*Where\*\* \((\S+), first bad", md))
        for cid in shown:
            current = run.explained.get(cid) == run.seen.get(cid) and cid in firsts
            assert current, (self.log, cid, "where shown but the cells changed")

    # -------------------------------------------------------------- rules: sweeping
    @rule(interrupt=st.one_of(st.none(), st.integers(1, 8)), explain=st.booleans())
    def sweep(self, interrupt: int | None, explain: bool = False) -> None:
        """`harness sweep [--explain]`, perhaps Ctrl-C'd at its n-th cell run."""
        self.interrupt_at = interrupt
        before = set((self.root / "r" / "paths").glob("2*"))
        code, text = self.cli("sweep", str(self.matrix), "-q", "--out", str(self.root / "r"),
                              *(["--explain"] if explain else []))
        made = [p for p in (self.root / "r" / "paths").glob("2*") if p not in before]
        assert len(made) == 1, (self.log, made, text)
        run = RunDir(made[0])
        self.dirs.append(run)
        self.taken_in(run, self.now())
        if interrupt is not None:
            assert code == 130, (self.log, code, text)
            self.seen("interrupted")
            return
        assert set(run.cells) == set(self.now())
        if explain:
            self.took_where(run, {})
        self.check_answers(run, code, text, written=True)

    @precondition(lambda self: bool(self.dirs))
    @rule(data=st.data(), interrupt=st.one_of(st.none(), st.integers(1, 8)))
    def resume(self, data: st.DataObject, interrupt: int | None) -> None:
        run = data.draw(st.sampled_from(self.dirs), label="dir")
        self.interrupt_at = interrupt
        code, text = self.cli("sweep", str(self.matrix), "-q", "--resume", str(run.path))
        if run.kind != "sweep":
            # A re-decided copy is not a sweep's directory: refused, nothing run.
            assert code == 2 and "which --resume does not read" in text, (self.log, text)
            self.interrupt_at = None
            return
        self.taken_in(run, self.now())
        if interrupt is not None and code == 130:
            return
        # A resumed directory answers as a fresh sweep of the matrix now.
        assert run.cells == self.now(), (self.log, run.cells, self.now(), text)
        self.check_answers(run, code, text)

    # -------------------------------------------------------------- rules: editing
    @rule(what=st.sampled_from(["pin", "first bad pin", "scenario", "helper",
                                "iterations"]),
          image=st.integers(0, 3), value=st.integers(1, 5))
    def edit(self, what: str, image: int, value: int) -> None:
        """A user edits the matrix's pin of one image, the scenario file, the helper
        module it imports, or `iterations`."""
        if what == "pin":
            self.pins[image] = value
        elif what == "first bad pin":
            # The issue's own path: the first bad image pinned back to a good version.
            first = oracle(self.now())["cpu.s"][0]
            if first is not None:
                self.pins[IMAGES.index(first)] = 1
        elif what == "scenario":
            self.threshold["s"] = 2 + value % 3
        elif what == "helper":
            self.shift = value % 2
        else:
            self.iterations = 200 if value % 2 else 300
        self.log.append(f"edit {what}: {self.pins}, {self.threshold}, shift {self.shift}, "
                        f"iterations {self.iterations}")
        self.write_files()

    @precondition(lambda self: any(d.explained and d.kind == "sweep" for d in self.dirs))
    @rule(data=st.data())
    def repin_explained(self, data: st.DataObject) -> None:
        """The path issue 35 found by hand, as a rule so its variations are walked too:
        an explained run, the first bad image pinned back to a good version, the sweep
        resumed, then reported."""
        run = data.draw(st.sampled_from([d for d in self.dirs
                                         if d.explained and d.kind == "sweep"]), label="dir")
        self.edit("first bad pin", 0, 0)
        self.interrupt_at = None
        code, text = self.cli("sweep", str(self.matrix), "-q", "--resume", str(run.path))
        self.taken_in(run, self.now())
        self.check_answers(run, code, text)
        self.report_run(run)

    # -------------------------------------------------------------- rules: reading
    @precondition(lambda self: bool(self.dirs))
    @rule(data=st.data())
    def report(self, data: st.DataObject) -> None:
        self.report_run(data.draw(st.sampled_from(self.dirs), label="dir"))

    def report_run(self, run: RunDir) -> None:
        before, results = self.cell_files(run), sha(run.path / "results.json")
        code, text = self.cli("report", str(run.path))
        assert self.cell_files(run) == before, (self.log, "report rewrote a cell")
        self.check_answers(run, code, text,
                           written=sha(run.path / "results.json") != results)
        said = re.search(r"stale: the cells changed since; `(harness explain [^`]+)` "
                         r"refreshes it", text)
        if said is not None:
            # The stale note's command works: it explains the row's pair as it is now
            # (or says which cells must run again first, where the matrix changed).
            assert said.group(1) == f"harness explain {run.path}", (self.log, text)
            self.seen("stale where refreshed")
            self.explain_run(run, None)
            code, text = self.cli("report", str(run.path))
            if self.explained_ok:
                assert STALE not in text, (self.log, text)

    @precondition(lambda self: bool(self.dirs))
    @rule(data=st.data(), relax=st.booleans(), write=st.booleans())
    def reanalyze(self, data: st.DataObject, relax: bool, write: bool) -> None:
        """`report DIR --reanalyze [--set ...] [--write]`: an untouched cell keeps its
        verdict, a --set changes what it says, a cut samples file is unreadable; the
        directory is never written, a --write copy answers as the re-decided run."""
        run = data.draw(st.sampled_from(self.dirs), label="dir")
        before = {p: sha(p) for p in run.path.rglob("*") if p.is_file()}
        beside = set(run.path.parent.iterdir())
        argv = ["report", str(run.path), "--reanalyze"]
        if relax:
            argv += ["--set", "analysis.leak-floor-bytes=1000000000000",
                     "--set", "analysis.heap_floor_bytes=1000000000000",
                     "--set", "analysis.live_floor_bytes=1000000000000"]
        code, text = self.cli(*argv, *(["--write"] if write else []))
        assert {p: sha(p) for p in run.path.rglob("*") if p.is_file()} == before, (
            self.log, "reanalyze wrote into the directory")
        if run.garbled:
            assert code == 2, (self.log, text)
            return
        made = set(run.path.parent.iterdir()) - beside
        assert len(made) == (1 if write else 0), (self.log, made)
        changed = set(re.findall(r"^  (\S+): \S+ -> (\S+) ", text, re.M))
        stale = self.stale(run)     # gaps: not re-decided, not in a --write copy
        cut = {cid for cid in run.samples_cut if run.cells.get(cid) is not None} - stale
        expect = {(cid, "unreadable") for cid in cut}
        if relax:
            expect |= {(cid, "ok") for cid, bad in run.cells.items()
                       if bad and cid not in cut | stale}
        assert changed == expect, (self.log, text)
        self.check_answers(run, code, text, unknown=cut, written=False, relaxed=relax)
        if made:
            [path] = made
            copy = RunDir(path, kind="reanalyzed", inputs=dict(run.inputs))
            for cid, bad in run.cells.items():
                digest = sha(path / "cells" / cid / "result.json")
                if digest:
                    copy.cells[cid], copy.seen[cid] = bool(bad) and not relax, digest
                else:
                    copy.cells[cid] = None
            # The copy holds the same runs (one run key each), re-decided: a where that
            # rested on them still does, wherever its pair is still the row's.
            copy.explained = {cid: copy.seen[cid] for cid, digest in run.explained.items()
                              if digest == run.seen.get(cid) and cid in copy.seen}
            assert {c for c, bad in copy.cells.items() if bad is None} == {
                c for c, bad in run.cells.items() if bad is None} | cut | stale, (
                self.log, made)
            self.dirs.append(copy)

    @precondition(lambda self: bool(self.dirs))
    @rule(data=st.data(), one=st.booleans())
    def explain(self, data: st.DataObject, one: bool) -> None:
        """`harness explain DIR [CELL]`: an unreadable or missing cell is never
        explained; the where it writes is checked by the next report."""
        run = data.draw(st.sampled_from(self.dirs), label="dir")
        cell = (data.draw(st.sampled_from(sorted(run.cells)), label="cell")
                if one and run.cells else None)
        code = self.explain_run(run, cell)
        if code == 0:
            results = sha(run.path / "results.json")
            report_code, report_text = self.cli("report", str(run.path))
            self.check_answers(run, report_code, report_text,
                               written=sha(run.path / "results.json") != results)

    def explain_run(self, run: RunDir, cell: str | None) -> int:
        wheres = {cid: sha(run.path / "cells" / cid / "where.json") for cid in run.cells}
        code, text = self.cli("explain", str(run.path), *([cell] if cell else []), "-q")
        self.explained_ok = code == 0 and "not explained" not in text
        if "no row has a bad cell" in text:
            assert not any(run.cells.values()), (self.log, text)
            assert code == 0, (self.log, code, text)
        if cell is not None and run.cells.get(cell) is None:
            assert code != 0, (self.log, text)
            assert sha(run.path / "cells" / cell / "where.json") == wheres[cell], (
                self.log, "an unreadable cell explained")
        self.took_where(run, wheres)
        return code

    def took_where(self, run: RunDir, wheres: dict[str, str]) -> None:
        """The where.json files a command wrote rest on the cells as they are now."""
        for cid in run.cells:
            where = run.path / "cells" / cid / "where.json"
            if not where.is_file():
                run.explained.pop(cid, None)
            elif sha(where) != wheres.get(cid, ""):
                role = json.loads(where.read_text()).get("role")
                if role == "first bad":
                    run.explained[cid] = run.seen.get(cid, "")
                    self.seen("explained")
                else:
                    run.explained.pop(cid, None)

    @rule(scenario=st.sampled_from(["s", "t"]))
    def bisect(self, scenario: str) -> None:
        """`harness bisect` of one row: the pair it names is a good image and the bad
        one right after it, by the truth now (the first bad, where the row is monotone);
        with a good first and a bad last image it names one."""
        code, text = self.cli("bisect", str(self.matrix), "--scenario", scenario, "-q",
                              "--out", str(self.root / "r"))
        row = f"cpu.{scenario}"
        line = [self.now()[cell_id(img, row)] for img in IMAGES]
        found = re.search(rf"^{row}: first bad: (\S+) \(last good: (\S+)\)", text, re.M)
        if not line[0] and line[-1]:
            assert found is not None, (self.log, line, text)
            assert code == 1, (self.log, code, text)
        if found is not None:
            bad, good = IMAGES.index(found.group(1)), IMAGES.index(found.group(2))
            assert bad == good + 1 and line[bad] and not line[good], (self.log, line, text)
            if line == sorted(line):
                first, last = oracle(self.now())[row]
                assert (found.group(1), found.group(2)) == (first, last), (self.log, text)

    @precondition(lambda self: len(self.dirs) >= 1)
    @rule(data=st.data())
    def compare(self, data: st.DataObject) -> None:
        """`harness compare A B`: a cell that differs between two runs made under other
        run keys (an edit between them) is not called noise."""
        a = data.draw(st.sampled_from(self.dirs), label="a")
        b = data.draw(st.sampled_from(self.dirs), label="b")
        code, text = self.cli("compare", str(a.path), str(b.path))
        if a.path == b.path or a.garbled or b.garbled or not a.cells or not b.cells:
            # one host's directory twice, a result.json of another shape, or a run
            # stopped before its first cell (no cell to compare): bad input
            assert code == 2, (self.log, code, text)
            return
        # Every cell of either side counts (issue 42 item 4): a bad one is 1; a cell
        # that gives no answer (unreadable, stale, not run) is named and makes it 4.
        sides = [self.known(a), self.known(b)]
        whole = all(len(k) == len(IMAGES) * len(ROWS) and None not in k.values()
                    for k in sides)
        bad = any(v for k in sides for v in k.values())
        assert code == (1 if bad else 0 if whole else 4), (self.log, code, text, sides)
        if not whole:
            assert "fix: harness sweep" in text, (self.log, text)
        for scenario, img in re.findall(
                r"^(\w+) leaks with (\w+) in .*differs between runs on the same host \(noise",
                text, re.M):
            cid = cell_id(img, f"cpu.{scenario}")
            assert a.cells.get(cid) == b.cells.get(cid), (self.log, "called noise", text)

    @precondition(lambda self: bool(self.dirs))
    @rule()
    def history(self) -> None:
        code, text = self.cli("history", str(self.root / "r" / "paths"))
        mine = [d for d in self.dirs if d.path.parent.name == "paths"]
        if not any(d.cells for d in mine):
            # every sweep so far was stopped before its first cell: nothing to show
            assert code == 2 and "no run here holds a finished cell" in text, (
                self.log, code, text)
            return
        garbled = any(d.garbled for d in mine)
        assert code in ((0, 1, 2, 4) if garbled else (0, 1, 4)), (self.log, code, text)
        # Its latest verdicts and its exit code come from cells made from the inputs as
        # they are now: a bad cell whose scenario, helper or pin changed since is stale.
        current_bad = any(bad and cid not in self.stale(d) for d in mine
                          for cid, bad in d.cells.items())
        assert code != 1 or current_bad, (self.log, code, text)

    @precondition(lambda self: bool(self.dirs))
    @rule(data=st.data(), mistake=st.sampled_from([None, "equal", "reversed", "unknown"]))
    def culprit(self, data: st.DataObject, mistake: str | None) -> None:
        """`harness culprit DIR`: a row's cause is named only from current G and B (a
        stale one is said, with the sweep that runs it again: run here); with --good and
        --bad that cannot be right, exit 2 and a fix that works."""
        run = data.draw(st.sampled_from(self.dirs), label="dir")
        if mistake is not None:
            self.culprit_mistake(run, mistake)
            return
        code, text = self.cli("culprit", str(run.path), "-q")
        if run.garbled:
            assert code == 2, (self.log, code, text)
            return
        recorded = oracle(dict(run.cells))
        stale = self.stale(run)
        searched = [row for row, (first, good) in recorded.items() if first and good
                    and not {cell_id(first, row), cell_id(good, row)} & stale]
        for row, (first, good) in recorded.items():
            if row in searched:
                assert f"{row}: cause: demo {good} -> {first}" in text, (self.log, text)
            elif first and good:
                assert f"{row}: cause:" not in text and "stale" in text, (self.log, text)
        # a row bad from its first image with a good one after it: culprit searches
        # which change fixed it (its pair is (that good one, the first image))
        fixed_in = any(first and not good and any(
            run.cells.get(cell_id(img, row)) is False
            for img in IMAGES[IMAGES.index(first) + 1:])
            for row, (first, good) in recorded.items())
        if searched:
            assert code == 1, (self.log, code, text)
        elif fixed_in:
            assert code in (1, 2, 4), (self.log, code, text)
        elif any(first and good for first, good in recorded.values()):
            assert code == 4 and "fix: harness sweep" in text, (self.log, code, text)
            self.seen("culprit stale")
            if run.kind == "sweep":
                self.run_fix(run, text)
        else:
            # nothing to search: exits as report does on the directory (issue 63 item
            # 12: it exited 2 on a clean one, where explain and report exit 0)
            want, _ = self.cli("report", str(run.path), "--format", "md")
            assert code == want and "nothing to search" in text, (self.log, code, want, text)

    def culprit_mistake(self, run: RunDir, mistake: str) -> None:
        known = self.known(run)
        row = "cpu.s"
        first, good = oracle(known)[row]
        if run.garbled or first is None or good is None:
            return
        flags = {"equal": ["--good", good, "--bad", good],
                 "reversed": ["--good", first, "--bad", good],
                 "unknown": ["--good", "v9", "--bad", first]}[mistake]
        code, text = self.cli("culprit", str(run.path), row, *flags, "-q")
        assert code == 2 and "fix: `harness culprit" in text, (self.log, code, text)
        self.seen("culprit flag mistake")
        fix = re.search(r"fix: `(harness culprit [^`]+)`", text)
        assert fix is not None, (self.log, text)
        code, text = self.cli(*fix.group(1).split()[1:], "-q")
        assert code == 1 and f"{row}: cause: demo {good} -> {first}" in text, (
            self.log, code, text)

    def run_fix(self, run: RunDir, text: str) -> None:
        """Run the sweep a fix line names for `run`: its cells are at the truth now."""
        fix = re.search(r"fix: (harness sweep \S+ --resume \S+)", text)
        assert fix is not None, (self.log, text)
        self.interrupt_at = None
        code, said = self.cli(*fix.group(1).split()[1:], "-q")
        self.taken_in(run, self.now())
        assert run.cells == self.now() and not self.stale(run), (self.log, said)
        self.check_answers(run, code, said)

    @precondition(lambda self: bool(self.dirs))
    @rule(data=st.data(), row=st.sampled_from(ROWS))
    def issue(self, data: st.DataObject, row: str) -> None:
        """`report DIR --issue ROW`: drafted where the row's first bad is named; a bad
        cell behind one that is unreadable, stale or not run is never "no bad cell"."""
        run = data.draw(st.sampled_from(self.dirs), label="dir")
        code, text = self.cli("report", str(run.path), "--issue", row)
        if run.garbled:
            assert code == 2, (self.log, code, text)
            return
        known = self.known(run)
        first, _ = oracle(known)[row]
        if first is not None:
            # drafted; it exits as `harness report DIR` does: 1, a cell is bad
            assert code == 1, (self.log, code, text)
        elif any(known.get(cell_id(img, row)) for img in IMAGES):
            assert code == 2 and "fix: harness sweep" in text, (self.log, code, text)
            assert "has no bad cell" not in text, (self.log, text)
            self.seen("issue behind a gap")
            if run.kind == "sweep":
                self.run_fix(run, text)
        else:
            assert code == 2, (self.log, code, text)

    @precondition(lambda self: any(d.kind == "sweep" for d in self.dirs))
    @rule(data=st.data(), helper=st.booleans())
    def edit_then_each(self, data: st.DataObject, helper: bool) -> None:
        """Issue 42: the scenario (or its helper module) edited, no --resume, then each
        command on an earlier run: each answers from current cells or says stale."""
        run = data.draw(st.sampled_from([d for d in self.dirs if d.kind == "sweep"]),
                        label="dir")
        if helper:
            self.shift = 1 - self.shift
        else:
            self.threshold["s"] = 2 + (self.threshold["s"] - 1) % 3
        self.log.append(f"edit {'helper' if helper else 'scenario'}: {self.threshold}, "
                        f"shift {self.shift}")
        self.write_files()
        self.report_run(run)
        self.explain_run(run, None)
        _, text = self.cli("report", str(run.path), "--issue", "cpu.s")
        assert "has no bad cell" not in text or not any(
            run.cells.get(cell_id(img, "cpu.s")) for img in IMAGES), (self.log, text)
        self.history()
        cells = sorted(self.stale(run)) or sorted(run.cells)
        if cells:
            self.why_run(run, cells[0])

    def why_run(self, run: RunDir, cid: str) -> None:
        """A current cell's rules (exit as `harness report` on the directory); a stale
        one is said to be stale with the command that runs it again (which works),
        never "no cell is called so"."""
        code, text = self.cli("report", str(run.path), "--why", cid)
        if run.garbled:
            assert code == 2, (self.log, code, text)
        elif cid in self.stale(run):
            assert code == 2 and f"{cid} is stale" in text, (self.log, code, text)
            assert "called so" not in text, (self.log, text)
            self.seen("why of a stale cell")
            if run.kind == "sweep":
                self.run_fix(run, text)
        elif run.cells.get(cid) is not None and cid not in run.samples_cut:
            want, _ = self.cli("report", str(run.path), "--format", "md")
            assert code == want and "decided by rule:" in text, (self.log, code, want, text)

    @rule(data=st.data())
    def other_matrix(self, data: st.DataObject) -> None:
        """Issue 42 item 2: a second matrix file with the same `name:`; `--resume` of it
        never continues a run of m.yaml, and its fix line works."""
        other = self.root / "o.yaml"
        other.write_text(self.matrix.read_text().replace("[s.py, t.py]", "[t.py]"))
        before = {d.path: self.cell_files(d) for d in self.dirs}
        runs = set((self.root / "r" / "paths").glob("2*"))
        self.interrupt_at = None
        code, text = self.cli("sweep", str(other), "-q", "--out", str(self.root / "r"),
                              "--resume")
        assert code == 2, (self.log, code, text)
        fix = re.search(r"fix: `(harness sweep [^`]+)`", text)
        if fix is not None:
            self.seen("other matrix refused")
            code, text = self.cli(*fix.group(1).split()[1:], "-q")
            assert code in (0, 1), (self.log, code, text)
        assert {d.path: self.cell_files(d) for d in self.dirs} == before, self.log
        for made in set((self.root / "r" / "paths").glob("2*")) - runs:
            shutil.rmtree(made)         # o.yaml's run: not one of the model's
        other.unlink()

    # -------------------------------------------------------------- rules: damage
    @precondition(lambda self: bool(self.dirs))
    @rule(data=st.data(), samples=st.booleans(), garbage=st.booleans())
    def cut_short(self, data: st.DataObject, samples: bool, garbage: bool) -> None:
        """A result.json or samples.jsonl cut short (a copy that stopped, a full disk),
        or a result.json overwritten with JSON of another shape."""
        run = data.draw(st.sampled_from(self.dirs), label="dir")
        done = sorted(cid for cid, bad in run.cells.items() if bad is not None)
        if not done:
            return
        cid = data.draw(st.sampled_from(done), label="cell")
        path = run.path / "cells" / cid / ("samples.jsonl" if samples else "result.json")
        text = path.read_bytes()
        if garbage and not samples:
            path.write_text('{"schema": 3, "id": 7, "verdict": "leak"}\n')
            run.garbled.add(cid)
        else:
            path.write_bytes(text[: len(text) // 2])
        self.log.append(f"{'garbled' if garbage and not samples else 'cut'} "
                        f"{path.relative_to(self.root)}")
        if samples:
            run.samples_cut.add(cid)
        else:
            run.cells[cid], run.seen[cid] = None, sha(path)

    @precondition(lambda self: bool(self.dirs))
    @rule(data=st.data())
    def copy(self, data: st.DataObject) -> None:
        run = data.draw(st.sampled_from(self.dirs), label="dir")
        self.copies += 1
        target = self.root / "copies" / f"c{self.copies}"
        shutil.copytree(run.path, target)
        self.log.append(f"cp -r {run.path.relative_to(self.root)} {target.name}")
        self.dirs.append(RunDir(target, dict(run.cells), dict(run.seen),
                                dict(run.explained), set(run.samples_cut), run.kind,
                                set(run.garbled), dict(run.inputs)))

    # -------------------------------------------------------------- always
    def cell_files(self, run: RunDir) -> dict[Path, str]:
        return {p: sha(p) for p in (run.path / "cells").rglob("*") if p.is_file()}

    @invariant()
    def nothing_written_outside(self) -> None:
        self.counts["steps"] += 1
        allowed = {"m.yaml", "s.py", "t.py", "helper.py", "r", "copies", "__pycache__"}
        extra = {p.name for p in self.root.iterdir()} - allowed
        assert not extra, (self.log, extra)
