"""`--iterations N` bounds every run of a cell: its re-runs (a leak its cap cut short in
a time budget ran again up to what the budget holds, ~50,000 calls) and its
confirmation rounds (at least 50 calls) included."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fakeruntime import Behaviour, FakeRuntime

from harness.matrixfile.model import Cell
from harness.runtimes.base import RunRequest
from harness.stages.settle import round_cell

SCENARIO = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"


class Counting(FakeRuntime):
    """A FakeRuntime that keeps each run's cell id and the calls it was asked for."""

    def __init__(self, behave):  # type: ignore[no-untyped-def]
        super().__init__(behave)
        self.lengths: list[tuple[str, int]] = []

    def run(self, request: RunRequest, progress):  # type: ignore[no-untyped-def]
        self.lengths.append((request.cell.id, request.cell.settings.agent_iterations))
        return super().run(request, progress)


def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, defaults: str,
          behave: dict[str, Behaviour], argv: list[str]) -> tuple[int, Counting]:
    from harness.cli import main

    fake = Counting(lambda cell: behave.get(cell.image.label, Behaviour()))
    monkeypatch.setattr("harness.runtimes.get_runtime", lambda name, docker_host=None: fake)
    (tmp_path / "s.py").write_text(SCENARIO)
    path = tmp_path / "m.yaml"
    path.write_text(f"name: m\nruntime: local\ndefaults: {defaults}\nmatrix:\n"
                    "  image: [{name: v1}, {name: v2}]\n  gpu: [none]\n  scenario: [s.py]\n")
    return main(["sweep", str(path), "--out", str(tmp_path / "r"), *argv]), fake


@pytest.mark.parametrize(("leak", "code"), [(4e6, 1), (2048, 4)])
def test_a_capped_leak_in_a_budget_runs_no_longer_than_iterations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leak: float, code: int,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a matrix of 5 s budgets whose v2 leaks (its cap, not its budget, ends a
    # short run: a cell that runs again up to what the budget holds)
    behave = {"v1": Behaviour(step_s=1e-4), "v2": Behaviour(leak_per_iter=leak, step_s=1e-4)}
    # WHEN it is swept with --iterations 50 (a cap raised to 100, what a decision needs)
    got, fake = sweep(tmp_path, monkeypatch, "{budget: 5s, sample_every: 10}", behave,
                      ["--iterations", "50"])
    err = capsys.readouterr().err
    assert "raised to what a decision needs" in err and "100 calls" in err
    # THEN no run of either cell asked for more than those 100 calls
    assert fake.lengths and max(n for _, n in fake.lengths) == 100, fake.lengths
    # AND v2 is decided from what it read: a leak past any cache (exit 1); growth a
    # cache could still explain stays undecided (exit 4), the bound said as the reason
    assert got == code, err
    if code == 4:
        assert ("not run again: --iterations 100 bounds every run of it; raise it, or "
                "leave it out, to let it decide") in err


def test_without_iterations_the_capped_leak_still_runs_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the same matrix, its cap set by the matrix (not the command line)
    behave = {"v1": Behaviour(step_s=1e-4), "v2": Behaviour(leak_per_iter=2048, step_s=1e-4)}
    code, fake = sweep(tmp_path, monkeypatch,
                       "{budget: 5s, sample_every: 10, max_iterations: 100}", behave, [])
    # THEN the leak its cap cut short runs again past it, up to what the budget holds
    assert max(n for cid, n in fake.lengths if cid.startswith("v2.")) > 100, fake.lengths
    assert code == 1


def test_rounds_run_no_longer_than_iterations(tmp_path: Path) -> None:
    from harness.matrixfile import load

    (tmp_path / "s.py").write_text(SCENARIO)
    (tmp_path / "m.yaml").write_text("name: m\nruntime: local\nmatrix:\n  image: [{name: v1}]\n"
                                     "  gpu: [none]\n  scenario: [s.py]\n")
    [cell] = load(tmp_path / "m.yaml").cells
    asked = dataclasses.replace(cell, scenario=dataclasses.replace(
        cell.scenario, settings=dataclasses.replace(cell.settings, asked_calls=30)))
    # GIVEN a leak's rounds (no cap) after a run of 100,000 calls: half of them
    assert round_cell(cell, 100_000, None).settings.iterations == 50_000
    # THEN a cell whose runs --iterations bounds runs its rounds within it, below the
    # rounds' least length too
    assert round_cell(asked, 100_000, None).settings.iterations == 30
    assert round_cell(asked, 40, 1000).settings.iterations == 30
    assert isinstance(asked, Cell)
