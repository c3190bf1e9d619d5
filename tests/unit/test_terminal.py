"""Issue 15 point 4: the terminal. Run through a pseudo-terminal at 80 and 160 columns:
a live display while cells run, a table that fits the width, NO_COLOR honoured, plain
lines when not a terminal."""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.resultkit import only_steps_undecided

if TYPE_CHECKING:
    from harness.matrixfile.model import Cell
    from harness.report.live import LiveProgress

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
COLOUR = re.compile(r"\x1b\[[0-9;]*3[0-9]m|\x1b\[[0-9;]*9[0-7]m")
SCENARIO = "import time\n\ndef setup(p):\n    return 1\n\ndef step(s):\n    time.sleep(0.005)\n"


def wait_for(what: str, done: Callable[[], object], timeout: float = 60) -> None:
    """Return once `done()` is true; fail naming `what` after `timeout` seconds (a
    deadline far past what it needs, never a fixed sleep before an assertion)."""
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def count_polls(live: Any) -> list[str]:
    """The cell ids of every poll the live display makes from now on, appended after
    the poll is done."""
    polled: list[str] = []
    update = live._update

    def counted(cid: str, task: Any, first: list[float]) -> None:
        update(cid, task, first)
        polled.append(cid)

    live._update = counted
    return polled


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color", **extra)
    return env


def in_pty(argv: list[str], cols: int, cwd: Path, **env: str) -> tuple[int, str]:
    """Run argv with stdin/stdout/stderr on a pseudo-terminal `cols` wide."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                            env=_env(**env), start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            data = os.read(master, 65536)
        except OSError:          # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=30)
    return code, b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Six images (too many for 80 columns), swept in an 80-column terminal."""
    tmp = tmp_path_factory.mktemp("term")
    (tmp / "s.py").write_text(SCENARIO)
    images = ", ".join(f"{{name: interp-{i}, python: {sys.executable}}}"
                       for i in range(6))
    (tmp / "m.yaml").write_text(
        "name: term\nruntime: local\ndefaults: {iterations: 160, warmup: 10, "
        f"sample_every: 5, repeats: 0}}\nmatrix:\n  image: [{images}]\n  scenario: [s.py]\n")
    code, out = in_pty([sys.executable, "-m", "harness", "sweep", "m.yaml", "--out", "r"],
                       80, tmp)
    [root] = list((tmp / "r" / "term").iterdir())
    # These tests read what a person sees, not the verdicts: on a busy machine a cell's
    # steps may be left undecided (exit 4), and its line is shown like any other.
    assert decided_or_steps_alone(code, root), out
    return root, out


def decided_or_steps_alone(code: int, root: Path) -> bool:
    """The sweep's exit (a report of it exits the same), where 4 is taken for a cell whose
    steps alone were left undecided."""
    cells = json.loads((root / "results.json").read_text())["cells"]
    return code in (0, 1) or (code == 4 and only_steps_undecided(cells))


def test_finished_lines_wider_than_the_terminal_are_shown_whole(
        swept: tuple[Path, str]) -> None:
    """What a person sees: the pty's bytes drawn by a terminal emulator. A line that wraps
    must not lose its tail under the live region redrawn below it."""
    import pyte

    _, out = swept
    screen = pyte.Screen(80, 400)
    pyte.ByteStream(screen).feed(out.encode("utf-8"))
    text = " ".join(line.strip() for line in screen.display)
    for k in range(1, 7):
        assert re.search(rf"harness: \[{k}/6\] interp-\d\.cpu\.s: (ok within run \(memory "
                         rf"stable, no slowdown(; no leak above [^)]*)?\)|ambiguous "
                         rf"within run \([^)]*busy host[^)]*\))"
                         rf" in \d+\.\ds(; vs baseline: pending)?", text), text


def test_live_display_shows_iterations_rate_and_elapsed(swept: tuple[Path, str]) -> None:
    _, out = swept
    plain = ANSI.sub("", out)
    assert re.search(r"\d+/170 it", plain), plain[-3000:]        # iterations done / planned
    assert re.search(r"[\d,]+ it/s", plain), plain[-3000:]        # rate
    assert re.search(r"\d:\d\d:\d\d", plain)                      # elapsed
    assert "harness: [6/6] interp-5.cpu.s:" in plain  # finished lines above
    assert plain.index("harness: [1/6]") < plain.index("results:")


@pytest.mark.parametrize("cols", [80, 160])
def test_table_fits_the_terminal(swept: tuple[Path, str], cols: int) -> None:
    root, _ = swept
    code, out = in_pty([sys.executable, "-m", "harness", "report", str(root)], cols, root)
    assert decided_or_steps_alone(code, root), out
    lines = ANSI.sub("", out).replace("\r", "").splitlines()
    assert max(len(line) for line in lines) <= cols, "\n".join(lines)
    assert "interp-5" in out
    # Six images do not fit across 80 columns: images go down. Across 160 they would,
    # in columns that part a figure from its unit ("+0.0" / "KiB/call"): down, a cell
    # a line, where that fits.
    assert any(line.lstrip().startswith("interp-5") for line in lines)
    if cols == 160:
        cells = [line for line in lines if line.startswith("interp-")]
        assert len(cells) == 6 and all(line.rstrip().endswith("/call") for line in cells)
    assert COLOUR.search(out), "colour on a terminal"


def test_no_color_is_honoured(swept: tuple[Path, str]) -> None:
    root, _ = swept
    _, out = in_pty([sys.executable, "-m", "harness", "report", str(root)], 160, root,
                    NO_COLOR="1")
    assert "interp-5" in out
    assert not COLOUR.search(out), repr(out[:500])


def test_plain_lines_when_not_a_terminal(swept: tuple[Path, str], tmp_path: Path) -> None:
    root, _ = swept
    m = root.parent.parent.parent / "m.yaml"
    proc = subprocess.run([sys.executable, "-m", "harness", "sweep", str(m), "--out",
                           str(tmp_path), "-k", "interp-0"],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert "\x1b[" not in proc.stdout + proc.stderr
    assert "harness: [1/1] interp-0.cpu.s: running" in proc.stderr


def test_pull_progress_by_layer() -> None:
    from harness.runtimes.dockerengine import PullLayers

    layers = PullLayers()
    for event in [{"status": "Pulling from nvidia/tensorflow", "id": "22.12-tf1-py3"},
                  {"status": "Pulling fs layer", "id": "a"}, {"status": "Pulling fs layer",
                                                              "id": "b"},
                  {"status": "Already exists", "id": "c"},
                  {"status": "Downloading", "id": "a",
                   "progressDetail": {"current": 50_000_000, "total": 200_000_000}},
                  {"status": "Downloading", "id": "b",
                   "progressDetail": {"current": 10_000_000, "total": 20_000_000}},
                  {"status": "Pull complete", "id": "b"}]:
        layers.add(event)
    assert layers.summary() == "2/3 layers done, downloading 50/200 MB"


def test_live_progress_reads_iterations_and_keeps_prepare_lines_in_place(
        tmp_path: Path) -> None:
    import io
    import json

    from rich.console import Console

    from harness.report.live import LiveProgress
    from tests.unit.test_orchestrator import make_matrix

    matrix = make_matrix(tmp_path, images="v1")
    [cell] = matrix.cells
    samples = tmp_path / "samples.jsonl"
    out = io.StringIO()
    live = LiveProgress(lambda cid: samples, Console(file=out, force_terminal=True,
                                                     width=100), refresh_s=0.05)
    try:
        live("pulling nvcr.io/nvidia/tensorflow:22.12-tf1-py3 ...")
        assert list(live.preparing) == ["nvcr.io/nvidia/tensorflow:22.12-tf1-py3"]
        live(f"[1/1] {cell.id}: running (400 iterations)")
        live.cell(cell, "running", None)
        [task] = live.bars.tasks
        samples.write_text(json.dumps({"type": "sample", "src": "timer", "phase": "measure",
                                       "i": 120}) + "\n")
        wait_for("the bar at 120", lambda: task.completed == 120)
        samples.write_text(json.dumps({"type": "sample", "src": "timer", "phase": "measure",
                                       "i": 300}) + "\n")
        # the rate shows once 0.2 s have passed since the first sample was seen
        wait_for("the bar at 300 with a rate",
                 lambda: task.completed == 300 and task.fields["rate"].endswith("it/s"))
        assert task.total == 420
        live.cell(cell, "done", None)
        live(f"[1/1] {cell.id}: ok (fine) in 1.0s")
    finally:
        live.close()
    text = ANSI.sub("", out.getvalue())
    assert f"harness: [1/1] {cell.id}: ok (fine)" in text
    assert f"harness: [1/1] {cell.id}: running" not in text     # the bar said it


@pytest.mark.parametrize("how", ["COLUMNS", "--width"])
def test_piped_table_honours_columns(swept: tuple[Path, str], how: str) -> None:
    """Issue 21 point 5: piped, the table was one 280-column line per row."""
    root, _ = swept
    argv = [sys.executable, "-m", "harness", "report", str(root), "--format", "console"]
    env = _env(COLUMNS="100") if how == "COLUMNS" else _env()
    if how == "--width":
        argv += ["--width", "100"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, proc.stdout
    assert "interp-5" in proc.stdout and "\x1b[" not in proc.stdout


def test_a_cell_waiting_for_its_venv_has_no_clock_and_the_build_line_gives_way(
        tmp_path: Path) -> None:
    """Issue 21 point 5: a bar counted time while the venv built; "building venv"
    lingered after the build and after Ctrl-C."""
    import io
    import json

    from rich.console import Console

    from harness.report.live import LiveProgress
    from tests.unit.test_orchestrator import make_matrix

    matrix = make_matrix(tmp_path, images="v1")
    [cell] = matrix.cells
    samples = tmp_path / "samples.jsonl"
    out = io.StringIO()
    live = LiveProgress(lambda cid: samples, Console(file=out, force_terminal=True,
                                                     width=100), refresh_s=0.05)
    try:
        polled = count_polls(live)
        live(f"{cell.image.label}: building venv with multidict==6.5.1")
        live.cell(cell, "running", None)
        # two polls of the running cell have looked for its samples and found none
        wait_for("two polls of the waiting cell", lambda: polled.count(cell.id) >= 2)
        [task] = live.bars.tasks
        assert not task.started and task.elapsed is None      # waiting: no clock
        assert list(live.preparing) == [cell.image.label]
        samples.write_text(json.dumps({"type": "sample", "src": "timer", "phase": "measure",
                                       "i": 10}) + "\n")
        wait_for("the bar's clock to start", lambda: task.started)
        wait_for("the build line to give way", lambda: live.preparing == {})
        live("v2: building venv with multidict==6.6.4")      # another image, then Ctrl-C
    finally:
        live.close()
    text = ANSI.sub("", out.getvalue())
    assert re.search(rf"harness: {cell.image.label}: built in \d+\.\d s", text)
    assert live.preparing == {}


def test_a_build_that_ended_unbuilt_says_no_build_time(tmp_path: Path) -> None:
    """Issue 79 (a new user's Ctrl-C during a pip venv build): "built in 3.6 s" was said
    before "interrupted", of a venv never built. A cell whose image was not built
    (`ended`: it failed, or Ctrl-C came first) clears its building line without it."""
    import io

    from rich.console import Console

    from harness.report.live import LiveProgress
    from tests.unit.test_orchestrator import make_matrix

    matrix = make_matrix(tmp_path, images="v1")
    [cell] = matrix.cells
    out = io.StringIO()
    live = LiveProgress(lambda cid: tmp_path / "none.jsonl",
                        Console(file=out, force_terminal=True, width=100), refresh_s=0.05)
    try:
        live(f"{cell.image.label}: building venv with multidict==6.5.1")
        live.cell(cell, "running", None)
        live.cell(cell, "ended", None)
        assert live.preparing == {} and live.tasks == {}
    finally:
        live.close()
    assert "built in" not in ANSI.sub("", out.getvalue())


@pytest.mark.parametrize("cols", [80, 160])
def test_the_first_progress_line_wraps_between_words(tmp_path: Path, cols: int) -> None:
    """Issue 42 item 8: at 80 columns `harness: 1 cell, runtime local, results in
    /tmp/.../20261124-00` / `2015` was cut by the terminal inside the directory's name."""
    import pyte

    (tmp_path / "s.py").write_text(SCENARIO)
    (tmp_path / "m.yaml").write_text(
        "name: a-matrix-with-a-long-name\nruntime: local\ndefaults: {iterations: 60, "
        f"warmup: 2, sample_every: 2, repeats: 0}}\nmatrix:\n  image: [{{name: a, python: "
        f"{sys.executable}}}]\n  scenario: [s.py]\n")
    code, out = in_pty([sys.executable, "-m", "harness", "sweep", "m.yaml", "--out",
                        str(tmp_path / "r")], cols, tmp_path)
    (run,) = (tmp_path / "r" / "a-matrix-with-a-long-name").iterdir()
    assert decided_or_steps_alone(code, run), out
    screen = pyte.Screen(cols, 200)
    pyte.ByteStream(screen).feed(out.encode("utf-8"))
    shown = [line.rstrip() for line in screen.display]
    # THEN it is wrapped by harness, not cut by the terminal: each screen line of it
    # ends between words or after a slash of the path, and read back it is whole
    at = next(i for i, line in enumerate(shown) if "results in" in line)
    lines = [shown[at]]
    while shown[at + len(lines)].startswith("  "):
        lines.append(shown[at + len(lines)].strip())
    joined = lines[0]
    for line in lines[1:]:
        joined += ("" if joined.endswith("/") else " ") + line
    assert joined == f"harness: 1 cell, runtime local, results in {run}", lines
    # a line of exactly the width fits (the screen above shows it whole): a path whose
    # length made the line 160 characters failed `< cols` though nothing was cut
    assert all(len(line) <= cols for line in lines), lines


def _live_at_80(tmp_path: Path) -> tuple[Cell, io.StringIO, LiveProgress]:
    """One v1 cell and a live display drawn into a string at 80 columns, whose own
    polls never come (refresh every 60 s): what it draws is what the calls made."""
    from rich.console import Console

    from harness.report.live import LiveProgress
    from tests.unit.test_orchestrator import make_matrix

    [cell] = make_matrix(tmp_path, images="v1").cells
    out = io.StringIO()
    live = LiveProgress(lambda cid: tmp_path / "none.jsonl",
                        Console(file=out, force_terminal=True, width=80), refresh_s=60)
    return cell, out, live


def test_a_cell_done_before_any_poll_saw_it_ends_its_venv_line(tmp_path: Path) -> None:
    """Issue 63's new-user pass: in the README's demo at 80 columns, a cell that ran in
    0.6 s between two polls left "multidict-6.5.1: cached venv ..." under the finished
    lines through all of the next cell's confirmation rounds; its image's line goes
    when the cell is done, as when a poll sees its first sample."""
    cell, out, live = _live_at_80(tmp_path)
    try:
        live(f"{cell.image.label}: cached venv /venvs/0286e9ff97b22040")
        live.cell(cell, "running", None)
        assert list(live.preparing) == [cell.image.label]
        live.cell(cell, "done", None)        # no poll ran: refresh_s is 60 s
        assert live.preparing == {}
        assert live.images == {}
    finally:
        live.close()
    assert "built in" not in ANSI.sub("", out.getvalue())    # a cached venv built nothing


def test_a_finished_line_drawn_after_a_cell_is_done_has_no_venv_line_under_it(
        tmp_path: Path) -> None:
    """This pass's look at the demo at 160 columns: after the last cell was done, its
    "multidict-6.6.4: cached venv ..." line was drawn again under "[4/4] ... ok" and under
    the next two lines (the live region redrawn as it was, until the next refresh). The
    region is redrawn as it is now; and a finished line that wraps is indented as the
    plain lines are."""
    cell, out, live = _live_at_80(tmp_path)
    try:
        live(f"{cell.image.label}: cached venv /venvs/4ddfec1c90c0958c")
        live.cell(cell, "running", None)
        live.live.refresh()      # as the display's own refresh, 4 times a second, does
        live.cell(cell, "done", None)
        said = f"[1/1] {cell.id}: ok within run (memory stable, no slowdown; " + (
            "no leak above 128 B/call in 300 calls) in 0.4s; vs baseline: pending")
        live(said)
        after = ANSI.sub("", out.getvalue()).split("harness: [1/1]", 1)[1]
    finally:
        live.close()
    assert "cached venv" not in after, after
    lines = ("harness: [1/1]" + after).replace("\r", "").splitlines()
    shown = lines[:lines.index(next(line for line in lines if line.endswith("pending"))) + 1]
    assert len(shown) > 1 and all(line.startswith("  ") for line in shown[1:]), shown
    assert " ".join(line.strip() for line in shown) == f"harness: {said}"
