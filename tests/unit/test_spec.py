"""matrix.yaml -> Matrix -> Cells: every error names file, key path, line and the fix."""

from __future__ import annotations

import dataclasses
import textwrap
import time
from pathlib import Path

import pytest

from harness import matrixfile
from harness.cli import main
from harness.errors import EXIT_BAD_INPUT, InputError, SpecError
from harness.matrixfile.model import Matrix

STEPS = "def setup(params):\n    return None\n\n\ndef step(state):\n    pass\n"
NGC = "nvcr.io/nvidia/tensorflow"


def write_matrix(tmp_path: Path, text: str, scenarios: tuple[str, ...] = ("rfft_loop",
                                                                          "zeros")) -> Path:
    for name in scenarios:
        (tmp_path / f"{name}.py").write_text(STEPS)
    path = tmp_path / "matrix.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def load(tmp_path: Path, text: str) -> Matrix:
    return matrixfile.load(write_matrix(tmp_path, text))


def spec_error(tmp_path: Path, text: str) -> SpecError:
    path = write_matrix(tmp_path, text)
    with pytest.raises(SpecError) as info:
        matrixfile.load(path)
    return info.value


def check(err: SpecError, path: str, line: int | None, *fix_words: str,
          problem: str = "") -> None:
    """The message names the file, the key path, the line and carries a fix."""
    text = str(err)
    assert err.file.endswith("matrix.yaml")
    assert text.startswith(err.file)
    assert err.path == path
    if path:
        assert f" {path}:" in text
    assert err.line == line
    if line is not None:
        assert f"matrix.yaml:{line}:" in text
    assert problem in err.problem
    if fix_words:
        assert "\n  fix: " in text
        for word in fix_words:
            assert word in err.fix


GOOD = """
name: demo
runtime: docker
defaults: {iterations: 100, warmup: 10, sample_every: 5, timeout: 20m}
matrix:
  image: [nvcr.io/nvidia/tensorflow:20.12-tf1-py3, nvcr.io/nvidia/tensorflow:22.12-tf1-py3]
  gpu: [0]
  scenario:
    - rfft_loop.py
    - {script: rfft_loop.py, id: rfft_zeros, params: {input: zeros}}
"""


# ---------------------------------------------------------------- errors
def test_unknown_top_level_key(tmp_path: Path) -> None:
    # GIVEN a typo at the top level (line 2)
    err = spec_error(tmp_path, GOOD.replace("runtime: docker", "runtime: docker\nretries: 3"))
    # THEN the key, its line and the allowed keys are named
    check(err, "retries", 3, "allowed keys", "baseline", problem="unknown key 'retries'")


def test_unknown_key_in_defaults(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD.replace("timeout: 20m}", "timeout: 20m,\n  iteratons: 5}"))
    # a typo gets the key it is nearest to, not the list of 20 (issue 21 point 5)
    check(err, "defaults.iteratons", 4, "did you mean 'iterations'?",
          problem="unknown key 'iteratons'")
    assert "sample-every" not in str(err)


def test_wrong_type_for_iterations(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD.replace("iterations: 100", 'iterations: "ten"'))
    check(err, "defaults.iterations", 3, "whole number", "iterations: 2000", problem="'ten'")


@pytest.mark.parametrize("value", ["20 minutes", "-5", "0", "true", "[1]", "0s"])
def test_bad_duration(tmp_path: Path, value: str) -> None:
    err = spec_error(tmp_path, GOOD.replace("timeout: 20m", f"timeout: {value}"))
    check(err, "defaults.timeout", 3, "20m", problem="bad duration")
    # issue 79 item 13: one of 0 or less is said to be, not just "bad"
    assert ("must be more than 0" in err.problem) == (value in ("-5", "0", "0s"))


# Issue 79 item 6: `defaults: {timeout: 1ms}` alone was taken, and every cell then killed
# at its deadline with a fix that named iterations no one set.
@pytest.mark.parametrize(("text", "path", "line", "now"), [
    ("runtime: local\ndefaults: {timeout: 1ms}\nmatrix:\n  image: [python3]\n"
     "  scenario: [zeros.py]\n", "defaults.timeout", 2, "5s"),
    ("runtime: local\nmatrix:\n  image: [python3]\n  scenario:\n"
     "    - {script: zeros.py, budget: 30s,\n       timeout: 20s}\n",
     "matrix.scenario[0].timeout", 6, "30s"),
    ("runtime: local\ndefaults: {timeout: 10s}\nmatrix:\n  image: [python3]\n"
     "  scenario: [{script: zeros.py, budget: 10s}]\n", "defaults.timeout", 2, "10s"),
    ("runtime: local\ndefaults: {budget: 30m}\nmatrix:\n  image: [python3]\n"
     "  scenario: [zeros.py]\n", "defaults.budget", 2, "1800s"),
])
def test_a_timeout_within_the_budget_is_refused(tmp_path: Path, text: str, path: str,
                                                line: int, now: str) -> None:
    # GIVEN a timeout no longer than the run's time budget (the default one included)
    err = spec_error(tmp_path, text)
    # THEN it is refused where the timeout (or the budget) was written, with the fix
    # naming what is set: the budget, never iterations
    check(err, path, line, "raise timeout:", "lower budget:", problem="budget")
    assert now in err.problem and "iterations" not in str(err)


def test_a_short_timeout_of_a_fixed_length_is_taken(tmp_path: Path) -> None:
    # a fixed number of calls has no time to compare a timeout with
    m = load(tmp_path, "runtime: local\ndefaults: {iterations: 10, timeout: 1ms}\n"
             "matrix:\n  image: [python3]\n  scenario: [zeros.py]\n")
    assert m.cells[0].settings.timeout == 0.001


@pytest.mark.parametrize(("value", "seconds"), [("90s", 90.0), ("20m", 1200.0), ("1h", 3600.0),
                                                ("600", 600.0), ("250ms", 0.25)])
def test_good_durations(tmp_path: Path, value: str, seconds: float) -> None:
    m = load(tmp_path, GOOD.replace("timeout: 20m", f"timeout: {value}"))
    assert m.cells[0].settings.timeout == seconds


def test_exclude_matching_nothing(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD + "exclude:\n  - {image: '*19.01*'}\n")
    check(err, "exclude[0]", 11, "remove the entry", problem="matches no cell")


def test_exclude_with_unknown_key(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD + "exclude:\n  - image: '*20.12*'\n    python: 3.8\n")
    check(err, "exclude[0].python", 12, "image, gpu, scenario", problem="unknown key 'python'")


def test_include_without_scenario(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD + "include:\n  - {image: 'x/y:1', gpu: 0}\n")
    check(err, "include[0]", 11, "scenario:", problem="`image` and `scenario`")


def test_missing_scenario_file(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD.replace("- rfft_loop.py", "- nosuch.py"))
    check(err, "matrix.scenario[0]", 8, "relative to the matrix file",
          problem="scenario file not found: nosuch.py")


@pytest.mark.parametrize(("text", "line"), [("", None), ("# only a comment\n", None),
                                            ("---\n", 2)])
def test_empty_matrix_file(tmp_path: Path, text: str, line: int | None) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        matrixfile.load(path)
    # Issue 63 item 14: what to write, not "see examples/" (a pip-installed harness has
    # no examples/, and no `harness init`)
    check(info.value, "", line, "`matrix: {image: [{name: old, pip: [PKG==1.0]}",
          "setup(params) and step(state)", problem="empty")
    assert "examples/" not in str(info.value)


@pytest.mark.parametrize(("runtime", "missing", "fix"), [
    ("local", "image", "image: [{name: old, pip: [PKG==1.0]}, {name: new, pip: [PKG==2.0]}]"),
    ("docker", "image", "image: [REPO:OLD_TAG, REPO:NEW_TAG]"),
    ("local", "scenario", "scenario: [scenario.py]"),
])
def test_a_missing_axis_says_what_to_write(tmp_path: Path, runtime: str, missing: str,
                                           fix: str) -> None:
    # Issue 63 item 14: "missing key 'matrix.image'" had no fix line
    axes = {"image": "image: [a:1]", "scenario": "scenario: [rfft_loop.py]"}
    del axes[missing]
    err = spec_error(tmp_path, f"""
        runtime: {runtime}
        matrix:
          {next(iter(axes.values()))}
        """)
    check(err, "matrix", 2, fix, problem=f"missing key 'matrix.{missing}'")


def test_missing_matrix_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        matrixfile.load(tmp_path / "matrix.yaml")
    check(info.value, "", None, "matrix YAML", problem="not found")


def test_empty_image_list(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD.replace(
        "image: [nvcr.io/nvidia/tensorflow:20.12-tf1-py3, nvcr.io/nvidia/tensorflow:22.12-tf1-py3]",
        "image: []"))
    check(err, "matrix.image", 5, "at least one", problem="empty list")


def test_duplicate_scenario_ids(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD.replace("id: rfft_zeros", "id: rfft_loop"))
    check(err, "matrix.scenario[1]", 9, "id:", problem="share the id 'rfft_loop'")


def test_duplicate_image_labels(tmp_path: Path) -> None:
    # GIVEN two registries with the same tag: the tag alone would label both
    # 22.12-tf1-py3; each is labelled with its repository's name (issue 42 item 8)
    m = matrixfile.load(write_matrix(tmp_path, GOOD.replace(
        f"{NGC}:20.12-tf1-py3", "example.org/tf:22.12-tf1-py3")))
    assert [i.label for i in m.images] == ["tf-22.12-tf1-py3", "tensorflow-22.12-tf1-py3"]
    # AND two entries named alike are still refused, with the fix
    err = spec_error(tmp_path, GOOD.replace(
        f"[{NGC}:20.12-tf1-py3, {NGC}:22.12-tf1-py3]",
        f"[{{ref: {NGC}:20.12-tf1-py3, name: x}}, {{ref: {NGC}:22.12-tf1-py3, name: x}}]"))
    check(err, "matrix.image[1]", 5, "name:", problem="share the label 'x'")


def test_baseline_not_in_images(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD + "baseline: {image: '21.01-tf1-py3'}\n")
    check(err, "baseline.image", 10, "20.12-tf1-py3", "22.12-tf1-py3",
          problem="'21.01-tf1-py3' is not in matrix.image")


@pytest.mark.parametrize("value", ["gpu0", "-1", "1.5", "true", "GPU-xyz"])
def test_bad_gpu_value(tmp_path: Path, value: str) -> None:
    err = spec_error(tmp_path, GOOD.replace("gpu: [0]", f"gpu: [0, {value}]"))
    check(err, "matrix.gpu[1]", 6, '"all"', "UUID", problem="bad GPU")


def test_unknown_runtime(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD.replace("runtime: docker", "runtime: rkt"))
    check(err, "runtime", 2, "docker, local, podman", problem="unknown runtime 'rkt'")


def test_an_unquoted_day_that_does_not_exist_names_its_line(tmp_path: Path) -> None:
    """Issue 51 item 8: `as_of: [2025-02-30]` ended in a PyYAML traceback, exit 1."""
    err = spec_error(tmp_path, GOOD.replace("timeout: 20m}", "timeout: 20m, x: 2025-02-30}"))
    check(err, "", 3, "YYYY-MM-DD", problem="not valid YAML: '2025-02-30' is not a date")


def test_invalid_yaml_reports_line(tmp_path: Path) -> None:
    err = spec_error(tmp_path, GOOD.replace("gpu: [0]", "gpu: [0\n  bad: {"))
    assert err.line is not None and 7 <= err.line <= 9
    check(err, "", err.line, "indentation", problem="not valid YAML")


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    # GIVEN "billion laughs": 9 levels of 10 aliases = 10^9 leaves, a few hundred bytes
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    path = tmp_path / "matrix.yaml"
    path.write_text("\n".join(levels) + "\n")
    # WHEN it is loaded
    t0 = time.process_time()       # this process's CPU: the host's load does not stretch it
    with pytest.raises(SpecError) as info:
        matrixfile.load(path)
    # THEN a clean SpecError comes back in well under a second or two of CPU
    assert time.process_time() - t0 < 5
    assert "alias" in info.value.problem
    assert info.value.line is not None
    assert "write the matrix out plainly" in info.value.fix


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text("a: &a\n  b: *a\n")
    with pytest.raises(SpecError, match="nested deeper"):
        matrixfile.load(path)


@pytest.mark.parametrize(("block", "path", "words"), [
    ("{alpha: high}", "analysis.alpha", ("float", "alpha: 0.002")),
    ("{live_floor_bytes: true}", "analysis.live_floor_bytes", ("float",)),
    ("{min_samples: 12}", "analysis.min_samples", ("named constants", "drop it",
                                                    "alpha, min_ratio")),
    ("{autocorrelation: false}", "analysis.autocorrelation", ("named constants",)),
    ("{alpha: 0.9}", "analysis.alpha", ("(0, 0.5]", "range")),
    ("{heap-floor-bytes: -1}", "analysis.heap-floor-bytes", ("[0, inf)", "range")),
    ("{alpah: 0.01}", "analysis.alpah", ("alpha",)),
])
def test_analysis_block_errors(tmp_path: Path, block: str, path: str,
                               words: tuple[str, ...]) -> None:
    err = spec_error(tmp_path, GOOD + f"analysis: {block}\n")
    assert err.path == path
    assert err.line == 10
    assert "matrix.yaml:10:" in str(err)
    assert "\n  fix: " in str(err)
    text = err.problem + err.fix
    for word in words:
        assert word in text


def test_analysis_block_is_applied(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD + "analysis: {alpha: 0.01, live-floor-bytes: 64}\n")
    assert m.analysis.alpha == 0.01
    assert m.analysis.live_floor_bytes == 64


def test_at_most_eight_thresholds_are_a_users_to_set() -> None:
    """The `analysis:` keys a user sets are eight, each a field of AnalysisConfig; the
    rest are harness's named constants, in the same one module."""
    from harness.thresholds import SETTABLE, AnalysisConfig

    assert len(SETTABLE) <= 8
    assert set(SETTABLE) <= {f.name for f in dataclasses.fields(AnalysisConfig)}


# ---------------------------------------------------------------- expansion
def test_cells_are_the_product_of_the_axes(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD.replace("gpu: [0]", "gpu: [0, 1]"))
    assert [c.id for c in m.cells] == [
        "20.12-tf1-py3.gpu0.rfft_loop", "20.12-tf1-py3.gpu0.rfft_zeros",
        "20.12-tf1-py3.gpu1.rfft_loop", "20.12-tf1-py3.gpu1.rfft_zeros",
        "22.12-tf1-py3.gpu0.rfft_loop", "22.12-tf1-py3.gpu0.rfft_zeros",
        "22.12-tf1-py3.gpu1.rfft_loop", "22.12-tf1-py3.gpu1.rfft_zeros",
    ]
    assert [i.index for i in m.images] == [0, 1]
    assert m.cells[-1].row == "gpu1.rfft_zeros"
    assert m.cells[0].scenario.script == (tmp_path / "rfft_loop.py").resolve()
    assert dict(m.cells[1].scenario.params) == {"input": "zeros"}


def test_cell_ids_are_stable(tmp_path: Path) -> None:
    first = [c.id for c in load(tmp_path, GOOD).cells]
    second = [c.id for c in load(tmp_path, GOOD).cells]
    assert first == second
    assert "22.12-tf1-py3.gpu0.rfft_loop" in first


def test_gpu_labels(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD.replace("gpu: [0]", 'gpu: [none, all, "GPU-0123abcd-4567"]'))
    assert [g.label for g in m.gpus] == ["cpu", "gpuall", "gpu-0123abcd"]


def test_exclude_with_glob_on_image(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD.replace("gpu: [0]", "gpu: [0, 1]")
             + "exclude:\n  - {image: '*20.12*', gpu: 1}\n")
    ids = {c.id for c in m.cells}
    assert len(ids) == 6
    assert not any(i.startswith("20.12-tf1-py3.gpu1.") for i in ids)
    assert "22.12-tf1-py3.gpu1.rfft_loop" in ids


def test_include_adds_a_cell(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD + "include:\n  - {image: 'nvcr.io/nvidia/tensorflow:23.03-tf1-py3', "
             "gpu: 1, scenario: rfft_zeros}\n")
    assert len(m.cells) == 5
    added = m.cells[-1]
    assert added.id == "23.03-tf1-py3.gpu1.rfft_zeros"
    assert added.image.index == 2
    assert dict(added.scenario.params) == {"input": "zeros"}


def test_include_of_an_existing_cell_adds_nothing(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD + "include:\n  - {image: '22.12-tf1-py3', scenario: rfft_loop}\n")
    assert len(m.cells) == 4


def test_per_scenario_overrides(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD.replace("id: rfft_zeros,", "id: rfft_zeros, iterations: 7,"))
    by_id = {c.scenario.id: c.settings for c in m.cells}
    assert by_id["rfft_loop"].iterations == 100
    assert by_id["rfft_zeros"].iterations == 7
    # the other defaults are inherited, not reset
    assert by_id["rfft_zeros"].warmup == 10
    assert by_id["rfft_zeros"].timeout == 1200.0


@pytest.mark.parametrize("key", ["sample_every", "sample-every"])
def test_sample_every_both_spellings(tmp_path: Path, key: str) -> None:
    m = load(tmp_path, GOOD.replace("sample_every: 5", f"{key}: 3"))
    assert {c.settings.sample_every for c in m.cells} == {3}


def test_local_runtime_images(tmp_path: Path) -> None:
    m = load(tmp_path, """
        runtime: local
        matrix:
          image: [{pip: [numpy==1.26.4]}, {python: /usr/bin/python3, name: sys}]
          scenario: rfft_loop.py
        """)
    assert [i.label for i in m.images] == ["numpy-1.26.4", "sys"]
    assert m.images[0].pip == ("numpy==1.26.4",)
    assert [c.id for c in m.cells] == ["numpy-1.26.4.cpu.rfft_loop", "sys.cpu.rfft_loop"]
    assert m.name == "matrix"


def test_names_are_letters_of_any_script(tmp_path: Path) -> None:
    # Issue 63 item 11: é, Cyrillic and CJK letters (and a combining mark) are letters:
    # a matrix name, an image name and a scenario file's name taken as its id.
    (tmp_path / "sçénario_ñ.py").write_text(STEPS)
    m = load(tmp_path, """
        name: 数据-sweep
        runtime: local
        matrix:
          image: [{name: пп-3.0.9, pip: [a==1]}, {name: "cafe\u0301-2", pip: [a==2]}]
          scenario: [sçénario_ñ.py, {script: sçénario_ñ.py, id: 試験}]
        """)
    assert m.name == "数据-sweep"
    assert [c.id for c in m.cells] == [
        "пп-3.0.9.cpu.sçénario_ñ", "пп-3.0.9.cpu.試験", "cafe\u0301-2.cpu.sçénario_ñ",
        "cafe\u0301-2.cpu.試験"]
    assert ids(m, "пп and 試験") == ["пп-3.0.9.cpu.試験"]


def test_what_a_name_cannot_hold_is_refused_with_a_fix_that_keeps_its_letters(
        tmp_path: Path) -> None:
    err = spec_error(tmp_path, """
        runtime: local
        matrix:
          image: [{name: "пп 3.0.9/x", pip: [a==1]}]
          scenario: rfft_loop.py
        """)
    check(err, "matrix.image[0].name", 3, "name: пп-3.0.9-x", problem="letters (any script)")
    # A file name that is no id is said on the key the user wrote (script), not `id`.
    (tmp_path / "my scenario.py").write_text(STEPS)
    err = spec_error(tmp_path, """
        runtime: local
        matrix:
          image: [{name: a, pip: [a==1]}]
          scenario: [{script: my scenario.py}]
        """)
    check(err, "matrix.scenario[0].script", 4, "id: my-scenario",
          problem="the scenario's id, its file name 'my scenario' without an `id:`,")
    err = spec_error(tmp_path, """
        runtime: local
        matrix:
          image: [{name: a, pip: [a==1]}]
          scenario: [my scenario.py]
        """)
    check(err, "matrix.scenario[0]", 4, "{script: my scenario.py, id: my-scenario}")


# ---------------------------------------------------------------- -k selection
def ids(m: Matrix, expr: str | None) -> list[str]:
    return [c.id for c in matrixfile.select(m.cells, expr)]


def test_select_and_not(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD)
    assert ids(m, "rfft and not zeros") == ["20.12-tf1-py3.gpu0.rfft_loop",
                                            "22.12-tf1-py3.gpu0.rfft_loop"]


def test_select_parentheses(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD)
    assert ids(m, "(20.12 or zeros) and not (22.12 and loop)") == [
        "20.12-tf1-py3.gpu0.rfft_loop", "20.12-tf1-py3.gpu0.rfft_zeros",
        "22.12-tf1-py3.gpu0.rfft_zeros"]
    assert ids(m, "not (20.12 or zeros)") == ["22.12-tf1-py3.gpu0.rfft_loop"]


def test_select_is_case_insensitive_and_empty_selects_all(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD)
    assert ids(m, "ZEROS") == ["20.12-tf1-py3.gpu0.rfft_zeros", "22.12-tf1-py3.gpu0.rfft_zeros"]
    assert len(ids(m, None)) == len(ids(m, "")) == 4


@pytest.mark.parametrize("expr", ["rfft and", "(rfft", "rfft)", "and", "not", "rfft zeros",
                                  "()", "rfft or or zeros"])
def test_select_bad_expression(tmp_path: Path, expr: str) -> None:
    m = load(tmp_path, GOOD)
    with pytest.raises(InputError, match="-k"):
        matrixfile.select(m.cells, expr)


def test_select_nothing(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD)
    with pytest.raises(InputError, match="selects no cell") as info:
        matrixfile.select(m.cells, "pytorch")
    assert "20.12-tf1-py3.gpu0.rfft_loop" in str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT


# ---------------------------------------------------------------- CLI
def test_cli_bad_matrix_exits_2_without_traceback(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = write_matrix(tmp_path, GOOD.replace("runtime: docker", "runtime: rkt"))
    code = main(["sweep", str(path), "--out", str(tmp_path / "reports")])
    out, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert "Traceback" not in out + err
    assert f"{path}:2: runtime: unknown runtime 'rkt'" in err
    assert not (tmp_path / "reports").exists()


def test_cli_list_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_matrix(tmp_path, GOOD)
    assert main(["sweep", str(path), "--list", "-k", "zeros"]) == 0
    assert capsys.readouterr().out.split() == ["20.12-tf1-py3.gpu0.rfft_zeros",
                                               "22.12-tf1-py3.gpu0.rfft_zeros"]


def test_cli_bad_k_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_matrix(tmp_path, GOOD)
    assert main(["sweep", str(path), "--list", "-k", "rfft and"]) == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "unexpected end" in err


def test_rounds_setting_defaults_to_three_and_is_validated(tmp_path: Path) -> None:
    assert {c.settings.rounds for c in load(tmp_path, GOOD).cells} == {3}
    m = load(tmp_path, GOOD.replace("sample_every: 5", "sample_every: 5, rounds: 0"))
    assert {c.settings.rounds for c in m.cells} == {0}
    err = spec_error(tmp_path, GOOD.replace("sample_every: 5", "sample_every: 5, rounds: -1"))
    assert "rounds" in str(err) and "must be an integer >= 0" in str(err)
    err = spec_error(tmp_path, GOOD.replace("sample_every: 5", "sample_every: 5, rounds: two"))
    assert "rounds" in str(err)


@pytest.mark.parametrize(("pin", "meant"), [
    ("multidict=6.5.1", "multidict==6.5.1"), ("multidict=>6.4", "multidict>=6.4"),
    ("numpy[extra] =< 2", "numpy[extra]<=2"), ("ujson<>5.12.0", "ujson!=5.12.0")])
def test_a_mistyped_pin_is_a_matrix_mistake_at_its_line(tmp_path: Path, pin: str,
                                                        meant: str) -> None:
    """Issue 63's new-user pass: `pip: ['multidict=>6.4']` exited 3 ("environment
    unavailable": uv pip cannot install it) after the venvs of the other images were
    built; a mistyped operator is the file's mistake, exit 2 at its line with the pin
    as meant."""
    err = spec_error(tmp_path, f"""
        name: pins
        runtime: local
        matrix:
          image:
            - {{name: a, pip: [multidict==6.4.4]}}
            - name: b
              pip:
                - numpy
                - "{pin}"
          scenario: [rfft_loop.py]
        """)
    check(err, "matrix.image[1].pip[1]", 9, f"write {meant}", problem="is not a version "
          "comparison")


@pytest.mark.parametrize(("pin", "said"), [
    ("six===", "'===' has no version after it"), ("six==", "'==' has no version after it"),
    ("six>=1.0,", "'' is no version comparison"), ("six >= 1.0, <", "'<' has no version"),
    ("six==1.0 2.0", "'==1.0 2.0' is no version comparison")])
def test_a_malformed_pin_is_a_matrix_mistake_at_its_line(tmp_path: Path, pin: str,
                                                         said: str) -> None:
    """Issue 79 item 7: `six===` exited 3 ("environment unavailable", check that these
    versions exist) once its venv was built; it is the file's typo, exit 2 at its line."""
    err = spec_error(tmp_path, f"""
        runtime: local
        matrix:
          image:
            - name: b
              pip:
                - numpy
                - "{pin}"
          scenario: [rfft_loop.py]
        """)
    check(err, "matrix.image[0].pip[1]", 7, "six==VERSION", problem=said)


@pytest.mark.parametrize("pin", ["multidict==6.4.4", "pkg===1.0", "pkg>=1,<2", "pkg~=1.4",
                                 "./local/dir", "pkg!=1.0", "pkg[x]==2",
                                 "pkg==1.0; python_version<'3.12'", "pkg==1.*",
                                 "pkg >= 1.0 , < 2", "pkg @ file:///opt/pkg-1.0.whl",
                                 "pkg>=1.0; python_version >= '3.8'", "pkg===1.0+local"])
def test_well_formed_pins_are_not_called_mistyped(tmp_path: Path, pin: str) -> None:
    matrix = load(tmp_path, f"""
        name: pins
        runtime: local
        matrix:
          image: [{{name: a, pip: ["{pin}"]}}]
          scenario: [rfft_loop.py]
        """)
    assert matrix.cells[0].image.pip == (pin,)


def test_a_baseline_written_as_its_image_says_the_mapping_to_write(tmp_path: Path) -> None:
    """Issue 63's new-user pass: `baseline: 20.12` said "give `KEY: VALUE` lines here,
    keys from: image"; the one mapping it can mean is the fix."""
    err = spec_error(tmp_path, GOOD + "baseline: nvcr.io/nvidia/tensorflow:20.12-tf1-py3\n")
    check(err, "baseline", 10, "write baseline: {image: nvcr.io/nvidia/tensorflow:"
          "20.12-tf1-py3}", problem="expected a mapping, got str")
