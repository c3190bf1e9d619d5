"""The matrix's `heap:` key (quiet | stock): validated, quiet by default, and what it
makes of the cell's command line and environment (harness/runtimes/base.py, the one
place every runtime takes them from)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness import matrixfile
from harness.cli import main
from harness.errors import EXIT_BAD_INPUT, SpecError
from harness.matrixfile.model import Cell
from harness.runtimes.base import ImageInfo, RunRequest, quiet_tunables

MATRIX = """
name: demo
runtime: local
defaults: {iterations: 100, warmup: 10, sample_every: 5%s}
matrix:
  image: [python3]
  gpu: [none]
  scenario:
    - steps.py
"""
STEPS = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"


def write(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "steps.py").write_text(STEPS)
    path = tmp_path / "matrix.yaml"
    text = MATRIX % extra
    if "max_iterations" in extra:   # early stop: iterations beside it is an error (issue 35)
        text = text.replace("iterations: 100, ", "")
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def cell(tmp_path: Path, extra: str = "") -> Cell:
    (only,) = matrixfile.load(write(tmp_path, extra)).cells
    return only


def request(c: Cell, tmp_path: Path) -> RunRequest:
    return RunRequest(c, ImageInfo(ref="python3"), tmp_path, tmp_path / "stop")


def test_heap_is_quiet_by_default_and_takes_stock(tmp_path: Path) -> None:
    assert cell(tmp_path).settings.heap == "quiet"
    assert cell(tmp_path, ", heap: stock").settings.heap == "stock"


@pytest.mark.parametrize("value", ["loud", "true", "1", "Quiet"])
def test_a_bad_heap_value_names_the_key_and_the_allowed_values(tmp_path: Path,
                                                                value: str) -> None:
    with pytest.raises(SpecError) as info:
        cell(tmp_path, f", heap: {value}")
    err = info.value
    assert err.path == "defaults.heap" and err.line == 3
    assert "must be one of quiet, stock" in err.problem
    assert "heap: stock" in err.fix


def test_the_cli_refuses_a_bad_heap_with_exit_2(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, ", heap: loud")
    code = main(["sweep", str(path), "--out", str(tmp_path / "reports")])
    _out, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert "Traceback" not in err and "defaults.heap" in err and "quiet, stock" in err


@pytest.mark.parametrize("early", [False, True])
def test_quiet_turns_the_tcache_off_and_asks_the_agent_to_collect(tmp_path: Path,
                                                                  early: bool) -> None:
    extra = ", max_iterations: 2000" if early else ""
    req = request(cell(tmp_path, extra), tmp_path)
    env = req.environment()
    assert env["PYTHONMALLOC"] == "malloc"
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.tcache_count=0"
    args = req.agent_args("agent.py", "steps.py", "out", "stop")
    assert args[args.index("--heap") + 1] == "quiet"
    assert ("--max-overhead" in args) is early


@pytest.mark.parametrize("early", [False, True])
def test_stock_leaves_the_allocator_and_the_heap_alone(tmp_path: Path, early: bool) -> None:
    extra = ", heap: stock" + (", max_iterations: 2000" if early else "")
    req = request(cell(tmp_path, extra), tmp_path)
    env = req.environment()
    assert env["PYTHONMALLOC"] == "malloc"      # `pythonmalloc: true`, its own key
    assert "GLIBC_TUNABLES" not in env
    args = req.agent_args("agent.py", "steps.py", "out", "stop")
    assert args[args.index("--heap") + 1] == "stock"


def test_quiet_keeps_the_matrix_own_tunables(tmp_path: Path) -> None:
    c = cell(tmp_path, ", env: {GLIBC_TUNABLES: 'glibc.malloc.arena_max=2'}")
    assert request(c, tmp_path).environment()["GLIBC_TUNABLES"] == \
        "glibc.malloc.arena_max=2:glibc.malloc.tcache_count=0"
    assert quiet_tunables("glibc.malloc.tcache_count=7") == "glibc.malloc.tcache_count=7"
    assert quiet_tunables(None) == quiet_tunables("") == "glibc.malloc.tcache_count=0"


def test_a_cell_times_its_steps_again_as_the_users_interpreter_would(tmp_path: Path) -> None:
    # Issue 85 item 3: the quiet heap's cell asks the agent for a second agent with the
    # user's allocator (--as-user); one that already runs so, or a GPU cell, does not
    args = request(cell(tmp_path), tmp_path).agent_args("agent.py", "s.py", "o", "c")
    assert "--as-user" in args and "--no-heap" not in args
    plain = cell(tmp_path, ", heap: stock, pythonmalloc: false")
    assert "--as-user" not in request(plain, tmp_path).agent_args("agent.py", "s.py", "o", "c")
    limited = cell(tmp_path, ", mem_limit: 2g")
    assert request(limited, tmp_path).as_user_s() is None


def test_a_confirmation_round_runs_as_the_user_reading_time_alone(tmp_path: Path) -> None:
    from harness.stages.settle import round_cell

    # GIVEN a cell's round as interleaved rounds run it, a cheap step's least calls asked
    short = round_cell(cell(tmp_path), 100, 1000, as_user=True, least=50_000)
    s = short.settings
    # THEN it runs under the user's allocator, reads no heap, makes the calls asked
    assert (s.pythonmalloc, s.heap, s.time_only, s.iterations) == (False, "stock", True,
                                                                   50_000)
    args = request(short, tmp_path).agent_args("agent.py", "s.py", "o", "c")
    assert "--no-heap" in args and "--as-user" not in args
    env = request(short, tmp_path).environment()
    assert "PYTHONMALLOC" not in env and "GLIBC_TUNABLES" not in env
