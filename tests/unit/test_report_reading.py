"""Reading a results directory without doing work twice: results.json's head read alone,
each cell's result.json copied into results.json as it was read, and a codec whose
decoders are made once per type saying the same things as before."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.report import Report, read_run, results_text, write_all
from harness.result.codec import DecodeError, decode, encode
from harness.store import RunStore
from harness.store.results import load_json_keys


def test_keys_read_from_the_head_of_a_big_file(tmp_path: Path) -> None:
    cells = {f"c{i:04d}": {"x": "y" * 100, "n": i} for i in range(3000)}
    data = {"schema": 2, "name": "scale", "meta": {"runtime": "local", "seconds": 1.5},
            "rows": [], "cells": cells}
    path = tmp_path / "results.json"
    text = results_text(data)
    path.write_text(text)
    assert json.loads(text) == data                     # still one JSON object
    assert text.index('"cells"') > text.index('"meta"')  # its cells last
    assert load_json_keys(path, ("name", "meta")) == {"name": "scale",
                                                       "meta": data["meta"]}


@pytest.mark.parametrize("text", [
    '{"cells": {"a": [1, 2, {"b": "}"}]}, "name": "n", "meta": {"k": 12345}}',
    '{ "name" : "n" ,\n "meta":{"k":12345}}',
    '{"meta": {"k": 12345}, "name": "n"}',
])
def test_keys_in_any_order_and_spacing(tmp_path: Path, text: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    assert load_json_keys(path, ("name", "meta")) == {"name": "n", "meta": {"k": 12345}}


def test_a_number_cut_at_a_read_boundary_is_read_whole(tmp_path: Path) -> None:
    pad = " " * ((1 << 16) - len('{"pad": "",  "meta": 1'))
    path = tmp_path / "r.json"
    path.write_text('{"pad": "' + pad + '",  "meta": 123456789}')
    assert load_json_keys(path, ("meta",)) == {"meta": 123456789}


@pytest.mark.parametrize("text", ["", "[1, 2]", '{"name": "n"', '{"name" "n"}', "\xff"])
def test_broken_or_missing_files_give_nothing(tmp_path: Path, text: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    assert load_json_keys(path, ("meta",)) == {}
    assert load_json_keys(tmp_path / "none.json", ("meta",)) == {}


def test_results_json_copies_each_cell_as_read(tmp_path: Path) -> None:
    """`harness report DIR` writes the same results.json whether it encodes each cell
    again or copies what it read (host samples left out either way)."""
    from harness.analysis.kinds import KINDS
    from tests.resultkit import as_result

    results = {f"{k}.r": as_result({
        "id": f"{k}.r", "row": "r", "verdict": k, "reason": f"why {k}",
        "image": {"label": k, "index": i}, "host_samples": [{"t": 0.5, "rss": 7}]})
        for i, k in enumerate(KINDS)}
    store = RunStore(tmp_path)
    write_all(store, Report.from_results("m", results, {"runtime": "local"}, tmp_path))
    for cid, res in results.items():
        (tmp_path / "cells" / cid).mkdir(parents=True, exist_ok=True)
        (tmp_path / "cells" / cid / "result.json").write_text(json.dumps(res.to_json()))
    run = read_run(tmp_path)
    assert set(run.stored) == set(results)
    encoded = Report.from_results("m", run.results, {}, tmp_path).to_json()
    copied = Report.from_results("m", run.results, {}, tmp_path, stored=run.stored).to_json()
    assert json.dumps(copied, sort_keys=True) == json.dumps(encoded, sort_keys=True)
    assert all("host_samples" not in c for c in copied["cells"].values())  # type: ignore[union-attr]


def test_results_json_bytes_copied_from_the_files_as_written(tmp_path: Path) -> None:
    """Issue 62: results.json's cells are copied from each result.json as the store wrote
    it (its indents taken out; `store.resultsjson.as_written`) a part at a time: the
    same bytes as encoding each cell again, host samples left out (an empty list; a
    non-empty one read the slow way); a result.json changed since it was read is not
    copied, the result read is encoded instead."""
    from harness.analysis.kinds import KINDS
    from harness.store.resultsjson import as_written
    from tests.resultkit import as_result

    results = {f"{k}.r": as_result({
        "id": f"{k}.r", "row": "r", "verdict": k, "reason": f"why \u00e9 {k}\n",
        "image": {"label": k, "index": i},
        "host_samples": [{"t": 0.5, "rss": 7}] if i % 2 else []})
        for i, k in enumerate(KINDS)}
    store = RunStore(tmp_path)
    for res in results.values():
        store.write_cell(res)
    raw = {cid: (tmp_path / "cells" / cid / "result.json").read_bytes() for cid in results}
    assert sum(as_written(b) is not None for b in raw.values()) == (len(results) + 1) // 2
    encoded = tmp_path / "encoded.json"
    write_all(store, Report.from_results("m", results, {}, tmp_path))
    (tmp_path / "results.json").rename(encoded)
    run = read_run(tmp_path)
    assert set(run.stored) == set(results)
    changed = sorted(results)[0]             # rewritten after it was read
    path = tmp_path / "cells" / changed / "result.json"
    path.write_text(path.read_text().replace("why", "WHY"))
    write_all(store, Report.from_results("m", run.results, {}, tmp_path, stored=run.stored))
    assert (tmp_path / "results.json").read_bytes() == encoded.read_bytes()
    written = json.loads(encoded.read_bytes())
    assert set(written["cells"]) == set(results)   # the changed one as read, not "WHY"
    assert all("host_samples" not in c for c in written["cells"].values())


@dataclass(frozen=True)
class Inner:
    slope: float
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outer:
    id: str
    inner: Inner
    items: list[Inner] = field(default_factory=list)
    by: dict[str, int] = field(default_factory=dict)
    maybe: Inner | None = None


def test_codec_paths_and_defaults() -> None:
    value = {"id": "a", "inner": {"slope": None, "names": ["x"]},
             "items": [{"slope": 1}, {"slope": 2.5}], "by": {"k": 3.0}}
    out = decode(Outer, value)
    assert math.isnan(out.inner.slope) and out.items[0].slope == 1.0
    assert out.by == {"k": 3} and out.maybe is None
    assert encode(out)["items"] == [{"slope": 1.0, "names": []},   # type: ignore[index]
                                    {"slope": 2.5, "names": []}]
    for bad, path in [({"id": "a", "inner": {"slope": "x"}}, "inner.slope"),
                      ({"id": "a", "inner": {"slope": 1}, "items": [{}, {"slope": "x"}]},
                       "items[1].slope"),
                      ({"id": "a", "inner": {"slope": 1}, "by": {"k": 1.5}}, "by.k"),
                      ({"id": "a", "inner": {"slope": 1, "names": ["x", 3]}}, "inner.names[1]")]:
        with pytest.raises(DecodeError) as err:
            decode(Outer, bad)
        assert err.value.path == path, (bad, err.value)
    with pytest.raises(DecodeError, match=r"^top\.inner\.slope: expected a number"):
        decode(Outer, {"id": "a", "inner": {"slope": [1]}}, "top")
    with pytest.raises(DecodeError, match=r"^inner\.slope: missing"):
        decode(Outer, {"id": "a", "inner": {}}, required=("inner.slope",))
    assert decode(Outer, {"id": "a"}).inner == Inner(0.0)
    skipped: list[str] = []
    assert decode(Outer, {"id": 3, "inner": {"slope": 1}},
                  skip=lambda e: skipped.append(e.path)).id == ""
    assert skipped == ["id"]
