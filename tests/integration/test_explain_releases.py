"""`harness sweep --explain` on real leaks in releases from the package index (local
runtime, cached venvs): the first bad release's leaking call is named per call and is
absent or flat in the release before it (or the one that fixed it).

- multidict 6.5.1 (aio-libs/multidict#1232): the MultiDict built at line 17 keeps its
  entries' storage after pop(); 0 in 6.4.4.
- multidict 6.5.1 in a forked pool's workers (issue 87 item 1): the task's line in the
  workers, at the rate they keep (by hand +11,986 B a call of two tasks); 0 in 6.4.4.
- msgspec 0.14.1 (PR #380): decode() of a 20-tuple; with memray in a venv of its own,
  the native part is named in C (mpack_decode_str), 0 in 0.14.0.
- ujson 5.12.0 (ultrajson#631): dumps(default=...) keeps the default's result, the repr
  string made in ExampleObject.__repr__; 0 in 5.12.1, which fixed it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.answers.search import free_of
from harness.cli import main
from harness.result.model import load_result

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def explained(tmp_path: Path, matrix: str, **defaults: str) -> dict[str, dict[str, object]]:
    """The example swept with --explain as written, but for `rounds: 0`: what is read is
    the leak's line, not the step time, and a step ratio of a pool's tasks (IPC-bound,
    1.41x pooled, then 1.09x and 0.67x in one run here) starts 2-6 interleaved round
    pairs of the example's budget (a quiet run here: 17 s and 21 CPU-s without them,
    37 s and 41 CPU-s with them)."""
    text = (ROOT / "examples" / matrix).read_text()
    assert "defaults: {" in text and "\n    - scenarios/" in text, matrix
    m = tmp_path / matrix
    for key, value in defaults.items():     # the example's own default, set lower
        text, n = re.subn(rf"\b{key}: [^,}}]+", f"{key}: {value}", text)
        assert n == 1, (matrix, key)
    m.write_text(text.replace("defaults: {", "defaults: {rounds: 0, ").replace(
        "\n    - scenarios/", f"\n    - {ROOT / 'examples' / 'scenarios'}/"))
    code = main(["sweep", str(m), "--explain", "-q", "--out", str(tmp_path)])
    assert code == 1, f"{matrix}: a release leaks, exit 1 (got {code})"
    [run] = [p for p in tmp_path.glob("*/*") if p.is_dir()]
    return {p.parent.name: json.loads(p.read_text()) for p in run.glob("cells/*/where.json")}


def first_bad(found: dict[str, dict[str, object]]) -> dict[str, object]:
    [bad] = [w for w in found.values() if w["role"] == "first bad"]
    return bad


def test_multidict(tmp_path: Path) -> None:
    bad = first_bad(explained(tmp_path, "multidict.yaml"))
    assert bad["cell"] == "multidict-6.5.1.cpu.multidict_pop"
    diff = [str(x) for x in bad["diff"]]            # type: ignore[union-attr]
    assert diff[0].startswith("heap: +5.") and "multidict_pop.py:17 step" in diff[0], diff
    assert diff[0].endswith("in multidict-6.5.1; 0 in multidict-6.4.4"), diff


def test_multidict_in_workers(tmp_path: Path) -> None:
    # (a 1 s budget, not the example's 3 s: the workers keep ~12 KB a call, read at its
    # line in a few hundred calls; 23 CPU-s profiled at 3 s)
    bad = first_bad(explained(tmp_path, "multidict-workers.yaml", budget="1s"))
    assert bad["cell"] == "multidict-6.5.1.cpu.multidict_pool"
    diff = [str(x) for x in bad["diff"]]            # type: ignore[union-attr]
    assert diff[0].startswith(("workers: +11.", "workers: +12.")), diff
    assert "multidict_pool.py:19 task" in diff[0], diff
    assert diff[0].endswith("in multidict-6.5.1; 0 in multidict-6.4.4"), diff


def test_msgspec(tmp_path: Path) -> None:
    bad = first_bad(explained(tmp_path, "msgspec.yaml"))
    assert bad["cell"] == "msgspec-0.14.1.cpu.msgspec_tuple"
    diff = [str(x) for x in bad["diff"]]            # type: ignore[union-attr]
    heap = next(d for d in diff if d.startswith("heap:"))
    assert "msgspec_tuple.py:20 step" in heap and "in msgspec-0.14.1" in heap, diff
    native = [d for d in diff if d.startswith("native:")]
    errors = bad["errors"]
    assert isinstance(errors, dict)
    if "native" in errors:                          # memray could not be installed here
        pytest.skip(f"native part not taken: {errors['native']}")
    assert native and "mpack_decode" in native[0] and native[0].endswith(
        "0 in msgspec-0.14.0"), diff


def test_ujson(tmp_path: Path) -> None:
    found = explained(tmp_path, "ujson.yaml")
    fixed = "ujson-5.12.1.cpu.ujson_default"
    if fixed not in found:
        # The leak is in the first image, so its pair is the first later image read free
        # of it (`answers.search.free_of`); a loaded host can leave 5.12.1's memory
        # unread as stable (CI111, beside two busy loops: its table showed a suspected
        # 1.37x on time, and no pair). The line is named then in the bad cell alone.
        [run] = [p for p in tmp_path.glob("*/*") if p.is_dir()]
        result = load_result(json.loads((run / "cells" / fixed / "result.json").read_text()))
        assert not free_of(result, "leak"), (result.verdict, result.rule)
        alone = found["ujson-5.12.0.cpu.ujson_default"]
        assert alone["role"] == "cell" and alone["paired"] is None, alone
        said = [str(x) for x in alone["summary"]]   # type: ignore[union-attr]
        assert any("ujson_default.py:15 ExampleObject.__repr__" in x for x in said), said
        return
    bad = first_bad(found)
    assert bad["cell"] == "ujson-5.12.0.cpu.ujson_default"
    assert bad["paired"] == fixed
    assert found[fixed]["role"] == "fixed in"
    diff = [str(x) for x in bad["diff"]]            # type: ignore[union-attr]
    assert "ujson_default.py:15 ExampleObject.__repr__" in diff[0], diff
    assert diff[0].endswith("in ujson-5.12.0; 0 in ujson-5.12.1"), diff
