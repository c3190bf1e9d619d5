"""`--format json` (issue 52 item 4): every command that answers prints one JSON document
on stdout and nothing else, in the envelope docs/json.md describes, with the keys and
types its tables list (read from the page here, so the page and the answers cannot
part), and exits as it does in words. Over FakeRuntime: the journey matrix of
test_journey (b's multidict 6.6.3 leaks), a dated row (as_of:) on a local runtime whose
days resolve from a made-up history, and two images fitted by memory."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakeruntime import Behaviour, FakeRuntime
from sweepkit import on_the_cli, write_matrix

from harness.app.answer import SCHEMA
from harness.cli import main
from harness.matrixfile.model import Cell, ImageSpec
from harness.runtimes.base import ImageInfo, Progress, RunOutcome, RunRequest
from harness.runtimes.local import LocalRuntime

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "json.md"
COMMANDS = ("sweep", "bisect", "fit", "explain", "culprit", "day", "compare", "history")

GOOD = ("multidict==6.4.4", "yarl==1.9.4", "attrs==23.2.0")
BAD = ("multidict==6.6.3", "yarl==1.20.1", "attrs==25.3.0")
FIXED = ("multidict==6.6.4", "yarl==1.20.1", "attrs==25.3.0")
ROW = "cpu.loop"


# ---------------------------------------------------------------- the page's tables
def tables(text: str) -> dict[str, dict[str, str]]:
    """Each section of docs/json.md (its `##` or `###` heading, in lower case) -> its
    table's rows: key path -> type."""
    out: dict[str, dict[str, str]] = {}
    section = ""
    for line in text.splitlines():
        heading = re.match(r"#{2,3} (.+)", line)
        if heading:
            section = heading[1].lower()
            continue
        row = re.match(r"\| `([^`]+)` \| ([^|]+) \|", line)
        if row and section:
            out.setdefault(section, {})[row[1]] = row[2].strip()
    return out


TABLES = tables(DOC.read_text(encoding="utf-8"))
SHAPES = {"cell": TABLES["cell"], "row": TABLES["row"]}


def fits(value: Any, kind: str) -> list[str]:
    """What is wrong with `value` as a `kind` of the page ("string or null", "array of
    row", "cell", ...); empty when it fits."""
    alternatives = [k.strip() for k in kind.split(" or ")]
    if value is None and "null" in alternatives:
        return []
    faults: list[str] = []
    for alt in alternatives:
        got = fits_one(value, alt)
        if not got:
            return []
        if alt != "null" or alternatives == ["null"]:
            faults.extend(got)
    return faults


def fits_one(value: Any, kind: str) -> list[str]:
    simple = {"string": str, "object": dict, "array": list, "boolean": bool}
    if kind == "null":
        return [] if value is None else [f"{value!r} is not null"]
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{value!r} is not an integer"]
    if kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{value!r} is not a number"]
    if kind in simple:
        return [] if isinstance(value, simple[kind]) else [f"{value!r} is not {kind}"]
    if kind.startswith("array of "):
        if not isinstance(value, list):
            return [f"{value!r} is not an array"]
        return [f"[{i}]: {f}" for i, item in enumerate(value)
                for f in fits(item, kind.removeprefix("array of "))]
    if kind in SHAPES:
        if not isinstance(value, dict):
            return [f"{value!r} is not a {kind}"]
        return problems(value, SHAPES[kind], strict=True)
    raise AssertionError(f"docs/json.md: unknown type {kind!r}")


def problems(value: dict[str, Any], table: dict[str, str], strict: bool = False
             ) -> list[str]:
    """Each documented key path missing from `value` or of another type; with
    `strict`, each key of `value`'s top level that the table does not list."""
    faults = []
    for path, kind in table.items():
        *parents, key = path.replace("[]", ".[]").split(".")
        nodes: list[Any] = [value]
        for part in parents:
            if part == "[]":
                nodes = [x for n in nodes for x in n]
            elif part == "*":
                nodes = [x for n in nodes for x in n.values()]
            else:
                nodes = [n[part] for n in nodes if n.get(part) is not None]
        for node in nodes:
            if key not in node:
                faults.append(f"{path}: missing")
            else:
                faults.extend(f"{path}: {f}" for f in fits(node[key], kind))
    if strict:
        listed = {p.split(".")[0].removesuffix("[]") for p in table}
        faults.extend(f"{k}: not in docs/json.md" for k in value if k not in listed)
    return faults


def enveloped(out: str, command: str, code: int) -> dict[str, Any]:
    """stdout as one JSON document (json.loads refuses anything after it), checked
    against the envelope's table and the command's; its answer."""
    doc = json.loads(out)
    assert problems(doc, TABLES["the envelope"], strict=True) == []
    assert (doc["schema"], doc["command"], doc["exit"]) == (SCHEMA, command, code)
    assert problems(doc["answer"], TABLES[command], strict=True) == []
    answer: dict[str, Any] = doc["answer"]
    return answer


# ---------------------------------------------------------------- running a command
@dataclass
class Ran:
    code: int
    out: str
    err: str


def run(*argv: str | Path) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return Ran(code, out.getvalue(), err.getvalue())


def both(command: str, *argv: str | Path) -> tuple[Ran, dict[str, Any]]:
    """The command in words, then in JSON: the same exit code; the JSON answer."""
    text = run(command, *argv)
    got = run(command, *argv, "--format", "json")
    assert got.code == text.code, (text.err, got.err)
    assert "Traceback" not in got.err
    return got, enveloped(got.out, command, got.code)


def leaks_with(pin: str) -> Any:
    return lambda c: Behaviour(leak_per_iter=6000) if pin in c.image.pip else Behaviour()


@dataclass
class Journey:
    matrix: Path
    out: Path
    runs: list[Path]        # two sweeps of the matrix: in words, then in JSON


@pytest.fixture(scope="module")
def journey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Journey]:
    """`sweep --find-cause` of g, b, c (b leaks) in words and in JSON, on the fake
    runtime, which stays the CLI's runtime for the module's tests."""
    tmp = tmp_path_factory.mktemp("json")
    with pytest.MonkeyPatch.context() as mp:
        on_the_cli(mp, FakeRuntime(leaks_with("multidict==6.6.3"), pins_as_packages=True))
        matrix = write_matrix(tmp, [{"name": n, "python": "python3", "pip": list(p)}
                                    for n, p in zip("gbc", (GOOD, BAD, FIXED), strict=True)],
                              gpus=["none"], name="j")
        got, answer = both("sweep", matrix, "--out", tmp / "r", "--find-cause", "-q")
        assert got.code == 1
        assert answer["bad_cells"] == [f"b.{ROW}"]
        assert answer["causes"][ROW]["summary"].startswith("went bad at image b (last good g)")
        assert answer["rows"][0]["first_bad"] == "b" and Path(answer["dir"]).is_dir()
        runs = sorted((tmp / "r" / "j").iterdir())
        assert len(runs) == 2 and Path(answer["dir"]) == runs[1]
        yield Journey(matrix, tmp / "r", runs)


# ---------------------------------------------------------------- the tests
def test_the_page_has_a_table_for_every_command_and_the_readme_links_it() -> None:
    assert set(COMMANDS) | {"report", "cell", "row", "the envelope"} <= set(TABLES)
    assert "[docs/json.md](docs/json.md)" in (ROOT / "README.md").read_text()


def test_the_checker_finds_a_missing_key_a_wrong_type_and_an_unlisted_key() -> None:
    cell = {"id": "a", "row": "r", "image": "i", "verdict": "ok", "reason": "", "text": "t"}
    assert problems({"dir": "d", "cells": [{"cell": "a", "result": cell, "where": None,
                                            "paired_where": None}]},
                    TABLES["explain"], strict=True) == []
    assert problems({"dir": 3, "cells": [{"cell": "a", "result": {**cell, "verdict": None},
                                          "paired_where": None}], "more": 1},
                    TABLES["explain"], strict=True) == [
        "dir: 3 is not string", "cells[].result: verdict: None is not string",
        "cells[].where: missing", "more: not in docs/json.md"]


def test_sweep_list_answers_the_cells(journey: Journey) -> None:
    _, answer = both("sweep", journey.matrix, "--list")
    assert answer["cells"] == [f"{i}.{ROW}" for i in "gbc"] and answer["dir"] is None


def test_report_keeps_results_json_document(journey: Journey) -> None:
    text = run("report", journey.runs[1])
    got = run("report", journey.runs[1], "--format", "json")
    assert got.code == text.code == 1
    doc = json.loads(got.out)
    assert problems(doc, TABLES["report"], strict=True) == []
    assert doc["schema"] == 2 and doc["bad_cells"] == [f"b.{ROW}"]
    assert doc["causes"][ROW]["summary"].startswith("went bad at image b")


def test_explain(journey: Journey) -> None:
    _, answer = both("explain", journey.runs[0], "-q")
    (cell,) = answer["cells"]
    assert cell["cell"] == f"b.{ROW}" and cell["result"]["verdict"] == "leak"
    assert cell["where"]["paired"] == f"g.{ROW}" and cell["paired_where"]["role"] == "last good"
    assert any("loop.py:" in line for line in cell["where"]["diff"])


def test_culprit_progress_goes_to_stderr(journey: Journey) -> None:
    got, answer = both("culprit", journey.runs[0], "-q")
    assert got.code == 1
    (row,) = answer["rows"]
    assert (row["status"], [c["name"] for c in row["answer"]]) == ("found", ["multidict"])
    assert row["sentence"].startswith("cause: multidict 6.4.4 -> 6.6.3")
    assert f"culprit {ROW}: G g (ok) vs B b (leak)" in got.err   # said as it searched


def test_compare_two_runs(journey: Journey) -> None:
    got, answer = both("compare", *journey.runs)
    assert got.code == 1 and answer["fits"] == []
    (c,) = answer["verdicts"]
    assert c["any_bad"] and c["same_host"] and not c["incomplete"]
    assert [p["key"] for p in c["pairs"]] == [[i, "loop"] for i in "gbc"]


def test_history(journey: Journey) -> None:
    got, answer = both("history", journey.out / "j", "--no-html")
    assert got.code == 1 and answer["html"] is None
    assert [r["tag"] for r in answer["runs"]] == ["r1", "r2"]
    (line,) = answer["lines"]
    assert line["latest"]["b"]["verdict"] == "leak" and line["latest"]["b"]["run"] == "r2"


def test_bisect(journey: Journey) -> None:
    got, answer = both("bisect", journey.matrix, "--good", "g", "--bad", "b",
                       "--out", journey.out / "bisect")
    assert got.code == 1
    assert (answer["found"], answer["first_bad"], answer["last_good"]) == (True, "b", "g")
    assert {"what": "pip multidict", "good": "6.4.4", "bad": "6.6.3"} in answer["diff"]
    # an end image that is not bad: an answer that exits 2, said in the document
    got, answer = both("bisect", journey.matrix, "--out", journey.out / "bisect")
    assert got.code == 2 and not answer["found"]
    assert answer["sentence"].startswith("no bad image: the last image c is ok")


def test_day_on_a_run_of_no_dated_image_is_bad_input(journey: Journey) -> None:
    """Issue 79 item 13: `harness day DIR` on a run with no `as_of:` image searched
    nothing and exited 0; it is the command's input that does not fit, exit 2, with
    nothing on stdout in words or JSON."""
    text, got = run("day", journey.runs[0]), run("day", journey.runs[0], "--format", "json")
    assert got.code == text.code == 2
    assert got.out == "" and got.err == text.err
    assert "no dated image" in got.err and "\n  fix: " in got.err


@pytest.mark.parametrize("argv", [
    ["explain", "{tmp}/nope"], ["culprit", "{run}", "gpu9.nope"], ["day", "{tmp}/nope"],
    ["history", "{tmp}/nope"], ["compare", "{run}", "{tmp}/nope"],
    ["bisect", "{matrix}", "--bad", "v99"], ["sweep", "{tmp}/nope.yaml"],
    ["fit", "{matrix}"], ["report", "{tmp}/nope"],
], ids=lambda argv: argv[0])
def test_bad_input_is_exit_2_with_nothing_on_stdout(journey: Journey, argv: list[str]) -> None:
    argv = [a.format(tmp=journey.out, run=journey.runs[0], matrix=journey.matrix)
            for a in argv]
    text, got = run(*argv), run(*argv, "--format", "json")
    assert got.code == text.code == 2
    assert got.out == "" and got.err == text.err and got.err.startswith("harness: ")


# ---------------------------------------------------------------- fit
MiB = 1 << 20


def by_memory(cell: Cell) -> Behaviour:
    """A peak of 300 MiB + 50 MiB (v0) or 70 MiB (v1) per batch, killed above 1 GiB."""
    peak = 300 * MiB + {"v0": 50, "v1": 70}[cell.image.label] * MiB * int(
        cell.scenario.params["batch"])
    return Behaviour(base_bytes=peak, oom=peak > 1 << 30)


def test_fit_and_compare_of_two_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_cli(monkeypatch, FakeRuntime(by_memory))
    matrix = write_matrix(tmp_path, ["v0", "v1"], [{"script": "net.py",
                                                    "params": {"batch": 1}}],
                          gpus=["none"], name="fitm", fit={"param": "batch", "range": "1..64"},
                          defaults={"iterations": 40, "warmup": 5, "sample_every": 2,
                                    "repeats": 2, "mem_limit": "1g"})
    got, answer = both("fit", matrix, "--out", tmp_path / "a", "-q")
    assert got.code == 1 and "fit batch in 1..64 over 2 row(s)" in got.err   # on stderr
    assert [r["max_fit"] for r in answer["rows"]] == [14, 10]
    assert answer["first_smaller"][0]["image"] == "v1"
    assert json.loads((Path(answer["dir"]) / "fit.json").read_text())["rows"][0][
        "max_fit"] == 14
    run("fit", matrix, "--out", tmp_path / "b", "-q")
    got, answer = both("compare", tmp_path / "a" / "fitm" / "fit-batch",
                       tmp_path / "b" / "fitm" / "fit-batch")
    assert got.code == 0 and answer["verdicts"] == []
    (c,) = answer["fits"]
    assert [(r["image"], r["a_fits"], r["b_fits"], r["smaller"]) for r in c["rows"]] == [
        ("v0", 14, 14, False), ("v1", 10, 10, False)]


# ---------------------------------------------------------------- day
BAD_DAY = "2025-06-30"


class DatedRuntime(LocalRuntime):
    """The local runtime's day search over a made-up index: multidict 6.6.3 (which
    leaks) from BAD_DAY on, 6.4.4 before; the cells run on FakeRuntime."""

    def __init__(self, cache: Path):
        super().__init__(cache)
        self.fake = FakeRuntime(lambda c: Behaviour(leak_per_iter=6000)
                                if (c.image.as_of or "") >= BAD_DAY else Behaviour())

    def resolve_ahead(self, cells: list[Cell], progress: Progress) -> None:
        return None

    def pins(self, image: ImageSpec) -> tuple[str, ...]:
        assert image.as_of is not None
        return ("multidict==" + ("6.6.3" if image.as_of >= BAD_DAY else "6.4.4"),)

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        pins = " ".join(self.pins(image))
        return ImageInfo(ref=image.ref, digest=f"venv:{pins}", labels={
            "as_of": image.as_of or "", "requirements": "multidict", "pins": pins})

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        return self.fake.run(request, progress)


def test_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_cli(monkeypatch, DatedRuntime(tmp_path / "cache"))
    # patched where they are used: the day search and the resolver
    monkeypatch.setattr("harness.days.search.upload_time", lambda name, version: None)
    for where in ("harness.days.search", "harness.runtimes.resolver"):
        monkeypatch.setattr(f"{where}.yanked_releases", lambda name: {})
    matrix = write_matrix(tmp_path, [{"name": "app", "python": "python3", "pip": ["multidict"],
                                      "as_of": ["2025-05-15", "2025-07-15"]}],
                          gpus=["none"], name="d")
    assert run("sweep", matrix, "--out", tmp_path / "r", "-q").code == 1
    (root,) = (tmp_path / "r" / "d").iterdir()
    got, answer = both("day", root, "-q")
    assert got.code == 1
    (row,) = answer["rows"]
    assert (row["last_good"], row["first_bad"], row["found"]) == ("2025-06-29", BAD_DAY, True)
    assert row["changes"] == [{"name": "multidict", "good": "6.4.4", "bad": "6.6.3",
                               "uploaded": None, "yanked": []}]
    assert row["sentence"] == ("went bad between 2025-06-29 and 2025-06-30: "
                               "multidict 6.4.4 -> 6.6.3")
