"""Issue 43: every case of benchmarks/corpus/ is complete (a link, its kind, a truth per
release measured by hand) and the matrix benchmarks/corpus.py writes for it is one
harness accepts, with one image per release in version order and the good release as
baseline."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpuskit.cases import CORPUS, Case, CaseError, load, load_all  # noqa: E402
from corpuskit.sweep import matrix_yaml  # noqa: E402

from harness.matrixfile.load import parse  # noqa: E402

CASES = load_all()


def test_the_corpus_has_its_leaks_and_controls() -> None:
    kinds = [c.kind for c in CASES]
    assert kinds.count("leak") >= 11 and kinds.count("control") >= 8, kinds


@pytest.mark.parametrize("case", CASES, ids=[c.slug for c in CASES])
def test_case_is_complete(case: Case) -> None:
    assert case.link.startswith("https://"), case.link
    assert case.measured, "say how the truth was measured"
    assert case.path.read_text().lstrip().startswith('"""'), "a docstring says the bug"
    for role, release in case.releases():
        assert release in case.truth, (role, release)
    if case.kind == "leak":
        bad = case.truth[case.versions["bad"]]["b_per_call"]
        for role, release in case.releases():
            if role != "bad":   # the good and fixed releases are controls: clean
                assert case.truth[release]["b_per_call"] < bad / 4, (role, release)


@pytest.mark.parametrize("case", CASES, ids=[c.slug for c in CASES])
def test_runner_matrix_is_valid(case: Case, tmp_path: Path) -> None:
    matrix = parse(matrix_yaml(case), tmp_path / "m.yaml")
    assert [i.label for i in matrix.images] == [case.label(r) for _, r in case.releases()]
    assert [s.script for s in matrix.scenarios] == [case.path]
    # the good release, or the fixed one where none is good: never the bad release
    reference = case.versions.get("good") or case.versions.get("fixed")
    assert matrix.baseline == (case.label(reference) if reference else None)


def test_a_case_without_truth_is_refused(tmp_path: Path) -> None:
    text = (CORPUS / "multidict_pop.py").read_text()
    start = text.index('    "truth": {')
    end = text.index("\n    },\n", start) + len("\n    },\n")
    broken = tmp_path / "broken.py"
    broken.write_text(text[:start] + '    "truth": {},\n' + text[end:])
    with pytest.raises(CaseError, match=r"no entry for 6\.4\.4"):
        load(broken)
