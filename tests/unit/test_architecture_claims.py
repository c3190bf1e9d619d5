"""ARCHITECTURE.md's claims that no other test held, each checked here by the sentence it
makes (the page names this file beside tests/unit/test_architecture.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
PAGE = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")


def said(text: str) -> None:
    """The page still makes the claim a test below holds (one line's words)."""
    assert " ".join(text.split()) in " ".join(PAGE.split()), text


def imported(path: Path) -> list[tuple[str, int]]:
    """Every module `path` imports, at its top or in a function, with the line."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, node.lineno))
            out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return out


def test_no_module_outside_the_cli_imports_it() -> None:
    said("`harness/cli/` parses, calls the layer below and renders, and no module outside "
         "it imports it")
    faults = [f"{p.relative_to(ROOT)}:{line} imports {name}"
              for p in sorted(HARNESS.rglob("*.py"))
              if "cli" not in p.relative_to(HARNESS).parts[:1] and p.name != "__main__.py"
              for name, line in imported(p)
              if name == "harness.cli" or name.startswith("harness.cli.")]
    assert faults == []


def test_the_api_and_the_cli_sweep_through_one_app_module() -> None:
    said("what a command does is in its folder (a sweep: `sweeping.course`, for `cli.sweep` "
         "and `harness.sweep`;")
    for path in (HARNESS / "api" / "matrix.py", HARNESS / "cli" / "sweeprun.py"):
        assert "harness.sweeping.course.sweep_and_report" in {n for n, _ in imported(path)}, path


def test_the_result_models_free_form_parts_are_json_never_any() -> None:
    said("Free-form parts from outside are `result.codec.JSON`, never `Any`")
    tree = ast.parse((HARNESS / "result" / "model.py").read_text(encoding="utf-8"))
    anys = [node.lineno for node in ast.walk(tree)
            if (isinstance(node, ast.Name) and node.id == "Any")
            or (isinstance(node, ast.Attribute) and node.attr == "Any")]
    assert anys == []
    assert any(isinstance(n, ast.Name) and n.id == "JSON" for n in ast.walk(tree))


def test_a_result_json_of_schema_1_to_3_reads_and_another_is_refused() -> None:
    said("`result.model.load_result` reads schema 1 to 3")
    from harness.result.codec import DecodeError
    from harness.result.model import READS, load_result

    assert READS == (1, 2, 3)
    cell = {"id": "x", "row": "r", "verdict": "ok", "image": {"label": "a", "index": 0}}
    for schema in READS:
        assert load_result({**cell, "schema": schema}).id == "x"
    with pytest.raises(DecodeError, match="schema"):
        load_result({**cell, "schema": 4})


def test_the_reports_say_signed_kib_through_one_formatter() -> None:
    """No report module divides by 1024 inside a figure it prints: KiB go through
    `analysis.records.kib` (MiB, 1024**2, are another unit)."""
    said("one KiB formatter of the reports, `analysis.records.kib`")
    faults = []
    for path in sorted((HARNESS / "report").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.BinOp) \
                    and isinstance(node.value.op, ast.Div) \
                    and isinstance(node.value.right, ast.Constant) \
                    and node.value.right.value == 1024:
                faults.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert faults == []


def test_the_eight_settable_thresholds_are_the_analysis_block(tmp_path: Path) -> None:
    said("the eight in `SETTABLE` are the matrix's `analysis:` block and `--set`")
    import dataclasses

    from harness.errors import InputError
    from harness.matrixfile.load import analysis_of
    from harness.thresholds import SETTABLE, AnalysisConfig

    assert len(SETTABLE) == 8
    for name in SETTABLE:
        value = getattr(AnalysisConfig(), name)
        cfg = analysis_of(tmp_path / "none.yaml", [f"analysis.{name}={value}"])
        assert getattr(cfg, name) == value
    constant = next(f.name for f in dataclasses.fields(AnalysisConfig)
                    if f.name not in SETTABLE)
    with pytest.raises(InputError, match="named constants"):
        analysis_of(tmp_path / "none.yaml",
                    [f"analysis.{constant}={getattr(AnalysisConfig(), constant)}"])


def test_a_directory_records_what_made_it_and_another_kind_is_refused(tmp_path: Path) -> None:
    said("Each results directory records in plan.json what made it (`store.runs`: kind, "
         "start time, matrix file); `store.runs.require` refuses a directory of another "
         "kind before anything is read")
    from harness.errors import InputError
    from harness.store import RunStore
    from harness.store.runs import BISECT, SWEEP_RESULTS, kind_of, matrix_file, require, started_of

    root = tmp_path / "bisect-gpu0.s"
    (tmp_path / "m.yaml").write_text("name: m\n", encoding="utf-8")
    RunStore(root).mark(BISECT, "m", str(tmp_path / "m.yaml"), started=1234.5)
    assert (kind_of(root), started_of(root)) == (BISECT, 1234.5)
    assert matrix_file(root) == tmp_path / "m.yaml"
    with pytest.raises(InputError, match="harness bisect"):
        require(root, SWEEP_RESULTS, "harness report")


def test_the_plans_an_option_runs_load_only_once_the_cells_ran() -> None:
    said("the plans only an option runs (`--explain`, `--find-cause`, `--between`) load "
         "with `sweeping.after` once the cells ran")
    code = ("import sys, harness.cli.sweeprun, harness.sweeping.course\n"
            "print(' '.join(m for m in sys.modules if m.startswith('harness.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    mods = set(out.stdout.split())
    later = {"harness.sweeping.after", "harness.explain", "harness.days.journey",
             "harness.culprit.app"}
    assert not later & mods, later & mods
    assert "harness.sweeping.after" in {n for n, _ in
                                        imported(HARNESS / "sweeping" / "course.py")}


def test_a_cells_way_goes_down_and_its_comparison_runs_nothing() -> None:
    said("A cell's way goes down that list, never back up: the comparison runs nothing "
         "but returns the rounds it needs (`stages.context.RoundsPlan`), which the way runs.")
    stages = HARNESS / "stages"
    up = [f"{p.name}:{line} imports {name}"
          for p in (stages / "context.py", stages / "measure.py", stages / "settle.py")
          for name, line in imported(p) if name.startswith("harness.stages.orchestrator")]
    assert up == []
    # The comparison and the decision are pure: given no services (`Context`), they call
    # nothing that runs an agent (the rounds, the way's run of a plan).
    pure = {"least_calls", "round_length", "against_baseline", "against_row",
            "with_comparison", "with_rounds", "with_verdict"}
    runs = {"Context", "ctx", "run_rounds", "run_plan", "settle", "_run", "Runner"}
    tree = ast.parse((stages / "settle.py").read_text(encoding="utf-8"))
    found = {f.name: sorted({n.id for n in ast.walk(f) if isinstance(n, ast.Name)} & runs
                            | {a.arg for a in f.args.args} & runs)
             for f in tree.body if isinstance(f, ast.FunctionDef) and f.name in pure}
    assert set(found) == pure and all(v == [] for v in found.values()), found
