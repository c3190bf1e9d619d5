"""The codec's decoder is msgspec first and the hand-made checking decoder for what
msgspec rejects: a result.json as written now never reaches the hand-made one, and for
any value at all the two together say exactly what the checking decoder alone says
(the same typed value, or the same error naming the same path)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Callable
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_result_model import full as model_full

from harness.analysis.records import (
    Finding,
)
from harness.result import codec
from harness.result.codec import JSON, DecodeError
from harness.result.model import REQUIRED, CellResult, Fingerprint, load_result

T = TypeVar("T")


def full() -> CellResult:
    """test_result_model's full result, with a cgroup version and host samples too (every
    field the codec carries)."""
    base = model_full()
    return dataclasses.replace(
        base, fingerprint=dataclasses.replace(base.fingerprint, cgroup=2),
        host_samples=({"t": 0.5, "rss": 7, "gpu": [1, None]},))


def written() -> dict[str, JSON]:
    """full() as result.json holds it (through JSON text)."""
    data = json.loads(json.dumps(full().to_json()))
    assert isinstance(data, dict)
    return data


def outcome(decode: Callable[..., object], value: object, **kwargs: bool) -> str:
    """What a decoder says about `value`: the typed value's repr (NaN reads "nan" on both
    sides) or the error's words."""
    try:
        return repr(decode(CellResult, value, required=REQUIRED, **kwargs))
    except DecodeError as exc:
        return f"DecodeError({exc.path!r}, {exc!s})"


def test_a_result_as_written_now_never_reaches_the_checking_decoder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("the checking decoder was asked")
    monkeypatch.setattr(codec, "decode_checked", refuse)
    assert load_result(written()) == full()


def test_what_msgspec_rejects_the_checking_decoder_reads_leniently(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[type] = []
    hand = codec.decode_checked

    def counted(cls: type[T], *args: object, **kwargs: object) -> T:
        asked.append(cls)
        return hand(cls, *args, **kwargs)    # type: ignore[arg-type]
    monkeypatch.setattr(codec, "decode_checked", counted)

    data = written()
    data["vs_baseline"]["confirmation"]["lo"] = None          # type: ignore[index,call-overload]
    data["memory"]["heap"].pop("n")                           # type: ignore[index,union-attr]
    data["findings"] = ["leak: heap grows"]
    data["skipped_lines"] = 3.0
    got = load_result(data)
    assert asked == [CellResult]
    assert got.vs_baseline is not None and got.vs_baseline.confirmation is not None
    assert math.isnan(got.vs_baseline.confirmation.lo)
    assert got.memory["heap"].n == 0 and got.skipped_lines == 3
    assert got.findings == (Finding("leak", "leak: heap grows"),)


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: d["memory"]["heap"].update(slope="fast"),
     "memory.heap.slope: expected a number, got 'fast'"),
    (lambda d: d["image"].pop("index"), "image.index: missing"),
    (lambda d: d.update(verdict="fine"), "verdict: expected one of"),
    (lambda d: d["vs_baseline"]["confirmation"]["rounds"][0].update(index=True),
     "vs_baseline.confirmation.rounds[0].index: expected a whole number, got True"),
])
def test_a_bad_value_is_named_by_its_path_not_in_msgspec_words(
        change: Callable[[dict[str, object]], None], said: str) -> None:
    data: dict[str, object] = written()
    change(data)
    with pytest.raises(DecodeError) as err:
        codec.decode(CellResult, data, required=REQUIRED, parsed=True)
    assert str(err.value).startswith(said)
    assert "$." not in str(err.value) and "Expected `" not in str(err.value)


def test_a_value_built_in_memory_is_checked_to_be_json() -> None:
    """msgspec takes a free-form field as it finds it: a value that was not parsed from
    JSON text goes to the checking decoder, which names what is not JSON."""
    data: dict[str, JSON] = written()
    data["host_samples"].append({"t": {1, 2}})     # type: ignore[union-attr,dict-item]
    with pytest.raises(DecodeError, match=r"^host_samples\[1\]\.t: not a JSON value"):
        codec.decode(CellResult, data, required=REQUIRED)


def test_skip_and_path_are_kept() -> None:
    said: list[str] = []
    got = codec.decode(Fingerprint, {"python": "3.6", "env": ["X"]},
                       skip=lambda e: said.append(str(e)), parsed=True)
    assert got == Fingerprint(python="3.6") and said == ["env: expected a mapping, got ['X']"]
    with pytest.raises(DecodeError, match=r"^top\.env: expected a mapping"):
        codec.decode(Fingerprint, {"env": ["X"]}, "top", parsed=True)


# Values a field may be given instead of its own: every JSON kind, and the near misses
# where a library and the checking decoder could part (3.0 for 3, True for 1, null).
ODD: st.SearchStrategy[JSON] = st.sampled_from(
    [None, True, False, 0, 1, 3, -1, 3.0, 2.5, 2**70, "", "x", "3", "true", "leak", "~",
     [], [1], [1, 2], ["x"], [None], {}, {"a": 1}, {"label": "a", "index": 0}])


def paths(value: JSON, at: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path inside a JSON value (keys and list indices)."""
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += paths(v, (*at, i))
    return found


@st.composite
def changed(draw: st.DrawFn) -> dict[str, JSON]:
    """result.json as written now, with one to four values replaced or keys removed."""
    data = written()
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(paths(data)[1:]))
        holder: JSON = data
        for part in where[:-1]:
            holder = holder[part]          # type: ignore[index,call-overload]
        last = where[-1]
        if isinstance(holder, dict) and isinstance(last, str) and draw(st.booleans()):
            holder.pop(last)
        else:
            holder[last] = copy.deepcopy(draw(ODD))    # type: ignore[index,call-overload]
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changed())
def test_msgspec_first_says_what_the_checking_decoder_says(data: dict[str, JSON]) -> None:
    assert outcome(codec.decode, data, parsed=True) == outcome(codec.decode_checked, data)


def loads(raw: bytes) -> str:
    """What json.loads reads from `raw` (as UTF-8), or the kind of error."""
    try:
        return repr(json.loads(raw.decode("utf-8")))
    except ValueError as exc:
        return type(exc).__name__


def parsed(raw: bytes) -> str:
    try:
        return repr(codec.parse(raw))
    except ValueError as exc:
        return type(exc).__name__


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                 lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                 max_leaves=12).map(lambda v: json.dumps(v).encode()),
    st.text(alphabet='{}[]:,"\\ 0123456789.eE+-NaInfitysrulx\t\n\ud800').map(
        lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=20)))
def test_parse_reads_what_json_loads_reads(raw: bytes) -> None:
    assert parsed(raw) == loads(raw)


@pytest.mark.parametrize("raw", [b"NaN", b"[1e400]", b'"\\ud800"', b"12345678901234567890123",
                                 b"\xef\xbb\xbf{}", b"\xff", b"{}x", b"[1,]"])
def test_parse_where_msgspec_and_json_loads_part(raw: bytes) -> None:
    assert parsed(raw) == loads(raw)
