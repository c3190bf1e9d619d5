"""Issue 29 item 4: `harness history reports/NAME` joins every sweep and watch run of a
matrix, per row and host over images in release order: each image's latest verdict with
the run it came from, flaky images marked, hosts never mixed; history.html beside the
runs. Runs are made by the fake runtime (the truth each test states) through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fakeregistry import NAME, Registry
from fakeruntime import Behaviour, FakeRuntime

from harness.cli import main
from harness.history import read_history
from harness.matrixfile.model import Cell
from harness.matrixfile.releases import release_order
from harness.result.model import Planned
from harness.store import RunStore
from harness.store.runs import SWEEP
from tests.resultkit import as_result

SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
TAGS = ["23.01-cpu", "23.02-cpu", "23.03-cpu"]
LEAK = 16384.0      # bytes per call: a leak the fake runtime states


class Demo:
    """The demo matrix `demo` (three NGC-style tags of one repository, one scenario), its
    truth (the tags that leak now) and the CLI runs over it."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch, port: int = 1):
        self.tmp = tmp
        self.repo = f"127.0.0.1:{port}/{NAME}"
        self.leaking: set[str] = set()
        (tmp / "loop.py").write_text(SCENARIO)
        self.suite = tmp / "demo.yaml"
        self.suite.write_text(
            "name: demo\nruntime: docker\n"
            "defaults: {iterations: 200, warmup: 10, sample_every: 5, repeats: 0}\n"
            "matrix:\n  image: [" + ", ".join(f"{self.repo}:{t}" for t in TAGS) + "]\n"
            "  gpu: [none]\n  scenario: [loop.py]\n")
        monkeypatch.setattr("harness.runtimes.get_runtime",
                            lambda name, docker_host=None: FakeRuntime(self.behave))

    def behave(self, cell: Cell) -> Behaviour:
        return Behaviour(leak_per_iter=LEAK if cell.image.label in self.leaking else 0.0)

    @property
    def reports(self) -> Path:
        return self.tmp / "reports"

    def sweep(self, *extra: str) -> None:
        main(["sweep", str(self.suite), "--out", str(self.reports), "-q", *extra])

    def watch(self, registry: Registry, tags: list[str]) -> int:
        registry.tags = tags
        return main(["watch", self.repo, "--baseline", tags[0], "--matrix", str(self.suite),
                     "--state", str(self.tmp / "state.json"), "--out", str(self.reports),
                     "-q"])


def history(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["history", str(path), *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def words_row(out: str, image: str) -> list[str]:
    """The columns of an image's line in a words table (split on runs of 2+ spaces)."""
    [line] = [x for x in out.splitlines() if x.strip().startswith(image + " ")]
    return re.split(r"\s{2,}", line.strip())


def test_three_runs_and_a_watch_run_joined(tmp_path: Path, registry: Registry,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    demo = Demo(tmp_path, monkeypatch, registry.port)
    # GIVEN three sweeps of the demo: every tag ok; then 23.03 leaks with the same run
    # (the same key: flaky); then 23.02 leaks in a run of other settings (its key
    # differs: the latest wins, not flaky)
    demo.sweep()
    demo.leaking = {"23.03-cpu"}
    demo.sweep()
    demo.leaking = {"23.02-cpu", "23.03-cpu"}
    demo.sweep("--iterations", "150")
    base = demo.reports / "demo"
    runs = sorted(p.name for p in base.iterdir())
    code, out = history(base, capsys, "--width", "120")
    # THEN one row over the three tags, each with its latest verdict and its run
    assert code == 1
    assert "3 runs, 3 images in release order, 1 row" in out
    assert words_row(out, "23.01-cpu")[1:3] == ["ok", "r3"]
    assert words_row(out, "23.02-cpu")[1:3] == ["leak, first bad", "r3"]
    assert words_row(out, "23.03-cpu")[1:4] == ["leak, flaky", "r3", "·LL"]    # r1..r3
    assert "23.03-cpu: flaky: ok in r1, leak in r2" in out
    assert "23.02-cpu: flaky" not in out          # r3 measured another run key
    assert "first bad: 23.02-cpu (last good: 23.01-cpu)" in out
    # WHEN a watch run checks a new tag, 23.04, against the baseline 23.01 (suite: demo)
    demo.leaking = set()
    assert demo.watch(registry, ["23.01-cpu", "23.02-cpu", "23.04-cpu"]) == 0
    code, out = history(base, capsys, "--width", "120")
    # THEN it adds to the history: its images latest, 23.03 (older runs only) in
    # calendar order, the watch run named
    assert code == 1          # 23.03's latest (r3) still leaks
    assert "r4 " in out and f"watch of {demo.repo}" in out
    assert [words_row(out, t)[0] for t in ["23.01-cpu", "23.02-cpu", "23.03-cpu",
                                           "23.04-cpu"]] == [
        "23.01-cpu", "23.02-cpu", "23.03-cpu", "23.04-cpu"]
    order = [line.split()[0] for line in out.splitlines()
             if re.match(r"\s+23\.0\d-cpu ", line)]
    assert order == ["23.01-cpu", "23.02-cpu", "23.03-cpu", "23.04-cpu"]
    assert words_row(out, "23.02-cpu")[1:3] == ["ok", "r4"]
    assert words_row(out, "23.04-cpu")[1:4] == ["ok", "r4", "---·"]   # only r4 had it
    assert words_row(out, "23.03-cpu")[1:3] == ["leak, first bad, flaky", "r3"]
    # history.html beside the runs, none of them written into
    assert f"written: {base / 'history.html'}" in out
    page = (base / "history.html").read_text()
    assert "flaky: ok in r1, leak in r2" in page and "<svg" in page and "23.04-cpu" in page
    assert sorted(p.name for p in base.iterdir() if p.is_dir())[:3] == runs
    assert not any(p.name == "history.html" for p in base.glob("*/**/*"))


def test_latest_wins_and_exit_code_follows_the_latest(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    demo = Demo(tmp_path, monkeypatch)
    # GIVEN a run where 23.02 leaks, then a fixed scenario run where nothing does
    demo.leaking = {"23.02-cpu"}
    demo.sweep()
    demo.leaking = set()
    (tmp_path / "loop.py").write_text(SCENARIO + "# fixed\n")     # another run key
    demo.sweep()
    code, out = history(demo.reports / "demo", capsys, "--width", "120", "--no-html")
    # THEN every latest verdict is good: exit 0, the ok from r2, nothing flaky
    assert code == 0
    assert words_row(out, "23.02-cpu")[1:3] == ["ok", "r2"]
    assert "flaky" not in out
    assert not (demo.reports / "demo" / "history.html").exists()


def test_two_hosts_are_two_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    demo = Demo(tmp_path, monkeypatch)
    # GIVEN the demo swept on this machine (ok), then on another one where 23.03 leaks
    demo.sweep()
    monkeypatch.setattr("socket.gethostname", lambda: "otherbox")
    demo.leaking = {"23.03-cpu"}
    demo.sweep()
    code, out = history(demo.reports / "demo", capsys, "--width", "120")
    # THEN one line per host, each with its own verdicts: this machine's ok is never
    # overwritten by the other's leak, and nothing is flaky across hosts
    assert code == 1
    heads = [x for x in out.splitlines() if x.startswith("cpu.loop @ ")]
    assert len(heads) == 2 and any("otherbox" in h for h in heads)
    assert "1 more line: a row measured on several hosts" in out
    blocks = out.split("\ncpu.loop @ ")[1:]
    other = next(b for b in blocks if b.startswith("otherbox"))
    mine = next(b for b in blocks if not b.startswith("otherbox"))
    assert words_row(other, "23.03-cpu")[1:3] == ["leak, first bad", "r2"]
    assert words_row(mine, "23.03-cpu")[1:3] == ["ok", "r1"]
    assert "flaky" not in out


@pytest.mark.parametrize("case", ["missing", "file", "run dir", "empty", "bisect only",
                                  "reports"])
def test_bad_input_exits_2_and_says_what_to_give(case: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "reports" / "demo"
    if case == "file":
        base.parent.mkdir(parents=True)
        base.write_text("x")
    elif case == "run dir":
        Demo(tmp_path, monkeypatch).sweep()
        [base] = list(base.iterdir())
    elif case == "empty":
        base.mkdir(parents=True)
    elif case == "bisect only":
        store = RunStore(base / "bisect-cpu.loop")
        store.mark("bisect", "demo", "m.yaml", ())
    elif case == "reports":
        Demo(tmp_path, monkeypatch).sweep()
        base = base.parent
    code, out = history(base, capsys)
    assert code == 2
    assert "give reports/NAME" in out and "Traceback" not in out
    if case == "run dir":
        assert "the directory above it" in out and str(base.parent) in out
    if case == "reports":     # the matrices below are named
        assert f"holds the runs of demo: harness history {base / 'demo'}" in out


def _write_run(base: Path, stamp: str, started: float, cells: list[dict[str, object]],
               images: list[str]) -> None:
    """A sweep's directory through the store: its plan, then each cell's result."""
    store = RunStore(base / stamp)
    results = [as_result(c) for c in cells]
    store.mark(SWEEP, "big", "big.yaml", tuple(
        Planned(r.id, r.row, r.image.label, images.index(r.image.label)) for r in results))
    plan = json.loads((store.root / "plan.json").read_text())
    plan["started"] = started
    (store.root / "plan.json").write_text(json.dumps(plan))
    for res in results:
        store.write_cell(res)


def test_many_images_fit_80_columns_as_a_grid(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN 24 calendar tags x 3 rows, swept twice; the older run also had 19.12, the
    # newer a tag 20.13 one flaky image
    tags = [f"{20 + k // 12}.{k % 12 + 1:02d}" for k in range(24)]
    rows = ["gpu0.alpha", "gpu0.beta", "gpu1.alpha"]

    def cells(images: list[str], bad: dict[str, str]) -> list[dict[str, object]]:
        return [{"id": f"{t}.{row}", "row": row, "image": {"label": t, "index": i},
                 "verdict": bad.get(f"{t}.{row}", "ok"),
                 "summary": {"median_step_s": 0.001}}
                for i, t in enumerate(images) for row in rows]

    base = tmp_path / "reports" / "big"
    _write_run(base, "1", 1000.0, cells(["19.12", *tags], {}), ["19.12", *tags])
    _write_run(base, "2", 2000.0, cells(tags, {"21.03.gpu1.alpha": "leak"}), tags)
    code, out = history(base, capsys, "--width", "80")
    lines = out.splitlines()
    # THEN every line fits, as the grid (tokens, legend), all 25 images in release order
    assert max(len(x) for x in lines) <= 80
    assert code == 1
    assert any(x.startswith("legend:") for x in lines)
    heads = [w for x in lines if x.startswith("row ") for w in x.split()[1:]]
    assert heads == ["19.12", *tags]
    assert "gpu1.alpha: 21.03: flaky: ok in r1, leak in r2" in out
    assert "latest verdicts from:" in out and "r1 (19.12)" in out


def test_release_order_slots_older_images_by_tag() -> None:
    # newest run first; 22.02 only in an older run goes between 22.01 and 22.03; an
    # image that compares with nothing goes after its own run's neighbour
    assert release_order([["22.01", "22.03", "22.04"], ["21.12", "22.01", "22.02"],
                          ["22.03", "nightly"]]) == [
        "21.12", "22.01", "22.02", "22.03", "nightly", "22.04"]
    assert release_order([["a-1.10", "a-1.12"], ["a-1.9", "a-1.11"]]) == [
        "a-1.9", "a-1.10", "a-1.11", "a-1.12"]


def test_a_reanalyzed_copy_stands_for_its_run(tmp_path: Path) -> None:
    base = tmp_path / "reports" / "big"
    one = [{"id": "a.gpu0.s", "row": "gpu0.s", "image": {"label": "a", "index": 0},
            "verdict": "leak"}]
    _write_run(base, "20260101-000000", 1000.0, one, ["a"])
    store = RunStore(base / "20260101-000000-reanalyzed")
    store.mark("reanalyzed", "big", "big.yaml", (Planned("a.gpu0.s", "gpu0.s", "a", 0),))
    store.write_cell(as_result({**one[0], "verdict": "ok"}))
    found = read_history(base)
    # THEN one run is read (the copy), so its re-decision is no flaky image
    assert [r.name for r in found.runs] == ["20260101-000000-reanalyzed"]
    assert not found.lines[0].flaky()
    assert "read as its re-decided copy" in found.notes[0]


def test_an_unreadable_latest_is_no_answer_and_a_readable_one_wins(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "reports" / "big"
    cell = {"id": "a.gpu0.s", "row": "gpu0.s", "image": {"label": "a", "index": 0},
            "verdict": "ok"}
    # GIVEN one run whose only result.json was cut short
    _write_run(base, "2", 2000.0, [cell], ["a"])
    (base / "2" / "cells" / "a.gpu0.s" / "result.json").write_text('{"id": "a.gp')
    code, out = history(base, capsys, "--width", "100", "--no-html")
    # THEN no verdict is made up: unreadable, not a complete answer (exit 4)
    assert code == 4
    assert "unreadable" in out and "not a complete answer" in out
    # WHEN an older run read it: its verdict is the latest readable one
    _write_run(base, "1", 1000.0, [cell], ["a"])
    code, out = history(base, capsys, "--width", "100", "--no-html")
    assert code == 0
    assert words_row(out, "a")[1:4] == ["ok", "r1", "·!"]


def test_the_page_draws_the_newest_runs_of_a_line_and_counts_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A weekly watch run adds a run each time: the page stays one size (the newest
    SHOWN_RUNS rows of squares a line), the older runs counted and linked above."""
    from harness.history import SHOWN_RUNS

    base = tmp_path / "reports" / "big"
    cell = {"id": "a.gpu0.s", "row": "gpu0.s", "image": {"label": "a", "index": 0},
            "verdict": "ok"}
    runs = SHOWN_RUNS + 3
    for k in range(runs):
        _write_run(base, f"{k:02d}", 1000.0 + k, [cell], ["a"])
    code, _ = history(base, capsys, "--width", "100")
    page = (base / "history.html").read_text()
    assert code == 0
    # the run table links every run; the line's own squares are the newest SHOWN_RUNS
    assert all(f'href="{k:02d}/report.html"' in page for k in range(runs))
    drawn = re.findall(r'<th class="run" title="[^"]*">(r\d+) ', page)
    assert drawn == [f"r{k + 1}" for k in range(runs - SHOWN_RUNS, runs)]
    assert "3 older runs measured it too" in page


def test_a_run_is_dated_as_its_directory_is_named_even_when_resumed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 63 item 14: history dated a run 21:45 whose directory says 21:42: the
    directory was named when it was made (local clock), history said plan.json's start
    (UTC), which `--resume` rewrote. Both are now the run's first start, on one clock."""
    import time as real

    demo = Demo(tmp_path, monkeypatch)
    demo.sweep("-k", "23.01")
    (run,) = (demo.reports / "demo").iterdir()

    class Later:     # the resume, three minutes on
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        @staticmethod
        def time() -> float:
            return real.time() + 180.0

    monkeypatch.setattr("harness.sweeping.course.time", Later())
    demo.sweep("--resume", str(run))
    plan = json.loads((run / "plan.json").read_text())
    assert plan["resumed"] - plan["started"] >= 179
    assert real.strftime("%Y%m%d-%H%M%S", real.localtime(plan["started"])) == run.name
    code, out = history(demo.reports / "demo", capsys, "--no-html")
    assert code == 0, out
    said = re.search(rf"r1 {run.name} \(sweep, (\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d) ", out)
    assert said is not None, out
    assert "".join(said.groups()) == run.name[:8] + run.name[9:13], out
