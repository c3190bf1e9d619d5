"""First bad version per row: a pure function of (label, verdict) in image order."""

from __future__ import annotations

from typing import Any

import pytest

from harness.answers.search import answer_rows, fingerprint_diff, first_bad
from tests.resultkit import as_result, as_results


def seq(*pairs: str) -> list[tuple[str, str]]:
    """seq("a:ok", "b:leak") -> [("a", "ok"), ("b", "leak")]."""
    out = []
    for p in pairs:
        label, verdict = p.split(":")
        out.append((label, verdict))
    return out


def test_good_good_bad() -> None:
    assert first_bad(seq("a:ok", "b:plateau", "c:leak")) == ("c", "b", True)


def test_bad_stays_bad() -> None:
    assert first_bad(seq("a:ok", "b:leak", "c:slowdown", "d:crash")) == ("b", "a", True)


def test_bad_from_the_first_image() -> None:
    assert first_bad(seq("a:oom", "b:leak")) == ("a", None, True)


def test_all_good() -> None:
    assert first_bad(seq("a:ok", "b:ok")) == (None, None, True)


def test_empty() -> None:
    assert first_bad([]) == (None, None, True)


def test_bad_good_bad_names_the_regression_after_the_good_one() -> None:
    # GIVEN the oldest image already bad, then fixed, then broken again
    assert first_bad(seq("a:leak", "b:ok", "c:leak")) == ("c", "b", False)


def test_non_contiguous() -> None:
    # GIVEN a regression that was fixed and came back (or a flaky cell)
    assert first_bad(seq("a:ok", "b:leak", "c:ok", "d:leak")) == ("b", "a", False)


@pytest.mark.parametrize("skipped", ["ambiguous", "not-applicable"])
def test_undecided_cells_are_skipped(skipped: str) -> None:
    # the last good is the last *decided* good, and undecided cells do not break contiguity
    assert first_bad(seq("a:ok", f"b:{skipped}", "c:leak", f"d:{skipped}", "e:crash")) == (
        "c", "a", True)
    assert first_bad(seq(f"a:{skipped}", "b:regression")) == ("b", None, True)
    assert first_bad(seq("a:ok", f"b:{skipped}")) == (None, None, True)


def fingerprint(packages: dict[str, str], cuda: str, python: str = "3.8.10",
                ref: str = "nvcr.io/nvidia/tensorflow:20.12-tf1-py3") -> dict[str, Any]:
    return {"image": {"ref": ref, "digest": None},
            "fingerprint": {"python": python, "platform": "Linux-x86_64",
                            "env": {"CUDA_VERSION": cuda, "CUDNN_VERSION": "8.0.5",
                                    "HOME": "/root"},
                            "packages": packages,
                            "gpu": {"devices": [{"name": "RTX 3090"}], "driver": "535"}}}


def test_fingerprint_diff_names_packages_and_cuda() -> None:
    good = fingerprint({"tensorflow": "1.15.4", "numpy": "1.17.3", "gone": "1"}, "11.1.0")
    bad = fingerprint({"tensorflow": "1.15.5", "numpy": "1.17.3", "new": "2"}, "11.8.0",
                      ref="nvcr.io/nvidia/tensorflow:22.12-tf1-py3")
    diff = fingerprint_diff(as_result(good), as_result(bad))
    assert diff == [
        ("image", "nvcr.io/nvidia/tensorflow:20.12-tf1-py3",
         "nvcr.io/nvidia/tensorflow:22.12-tf1-py3"),
        ("CUDA_VERSION", "11.1.0", "11.8.0"),
        ("pip tensorflow", "1.15.4", "1.15.5"),  # frameworks first, then by name
        ("pip gone", "1", "-"),
        ("pip new", "-", "2"),
    ]


def test_fingerprint_diff_of_identical_cells_is_empty() -> None:
    assert fingerprint_diff(as_result(fingerprint({"a": "1"}, "11")),
                            as_result(fingerprint({"a": "1"}, "11"))) == []


def test_fingerprint_diff_with_missing_fingerprint() -> None:
    diff = fingerprint_diff(as_result({"image": {"ref": "x"}}),
                            as_result(fingerprint({"a": "1"}, "11", ref="x")))
    assert ("CUDA_VERSION", "-", "11") in diff
    assert ("pip a", "-", "1") in diff
    assert ("gpu", "-", "['RTX 3090']") in diff


def result(label: str, index: int, verdict: str, row: str = "gpu0.loop",
           **fp: Any) -> dict[str, Any]:
    res = {"id": f"{label}.{row}", "row": row, "verdict": verdict,
           "image": {"label": label, "index": index, "ref": label},
           "gpu": {"label": row.split(".")[0]}, "scenario": {"id": row.split(".")[1]}}
    res["fingerprint"] = {"packages": fp}
    return res


def test_answer_rows_orders_by_image_index_not_dict_order() -> None:
    # GIVEN results arriving in completion order, not version order
    results = {r["id"]: r for r in (result("c", 2, "leak", tf="2"), result("a", 0, "ok", tf="1"),
                                    result("b", 1, "ok", tf="1"),
                                    result("a", 0, "leak", "gpu1.loop"))}
    rows = answer_rows(as_results(results))
    assert [r.row for r in rows] == ["gpu0.loop", "gpu1.loop"]
    r0, r1 = rows
    assert [c[0] for c in r0.cells] == ["a", "b", "c"]
    assert (r0.first_bad, r0.last_good) == ("c", "b")
    assert r0.sentence == "first bad: c (last good: b)"
    assert ("pip tf", "1", "2") in r0.diff
    assert (r0.gpu, r0.scenario) == ("gpu0", "loop")
    assert r1.sentence.startswith("bad from the first image (a)")
    assert r1.diff == []


def test_answer_rows_flags_non_contiguous() -> None:
    results = {r["id"]: r for r in (result("a", 0, "ok"), result("b", 1, "crash"),
                                    result("c", 2, "ok"), result("d", 3, "crash"))}
    (row,) = answer_rows(as_results(results))
    assert not row.contiguous
    assert "not contiguous" in row.sentence
    assert row.to_dict()["first_bad"] == "b"


def test_answer_rows_all_good() -> None:
    (row,) = answer_rows(as_results({"a": result("a", 0, "ok")}))
    assert row.sentence == "no bad image"
    assert row.first_bad is None


def test_search_compares_only_env_keys_the_agent_records() -> None:
    # The agent is stdlib-only and self-contained (it runs inside the images), so it
    # keeps its own list; the stack keys compared must be among the recorded ones.
    from harness.agent import agent
    from harness.answers import search

    assert set(search.STACK_ENV_KEYS) <= set(agent.ENV_KEYS)
