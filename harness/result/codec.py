"""Typed values <-> JSON, for the result model: one encoder and one checking decoder.

`encode` turns frozen dataclasses (and tuples, dicts, floats) into JSON values:
fields in order (then what a record's `json_extra()` adds: derived values, such as a
round's ratio, for a reader; the decoder ignores them), tuples as lists, NaN and
infinities as null. `decode(T, value)` builds
a `T` from JSON, checking every value against the field's type and naming the path of
the first one that does not fit (`memory.heap.slope: expected a number, got 'x'`).

Written by older code, a field may be missing: it reads as its default, else as the
empty value of its type (0, "", False, None, an empty collection). A `Literal` field
with no default and the fields named in `required` must be there. Keys the type does
not know are ignored, so a newer writer's additions do not break an older reader.

Decoding a value parsed from JSON text (`parsed=True`: result.json, plan.json) is
msgspec's first (`msgspec.convert`, strict): it builds the same dataclasses from a value
that fits the types exactly, which is every result.json this harness writes now, and
does it in C. Whatever it rejects (a missing field without a default, a
null for NaN, a whole number written as 3.0, findings kept as text, a value of the wrong
type) goes to the hand-made decoder of `harness.result.checked`, which reads it
leniently or names the path of the bad value as before; msgspec's own words are never
shown. msgspec alone cannot keep those promises: it has no "empty value of the type"
for a missing field, reads null for `float` as an error, and has no hook for a record
kept as text, and its errors do not name the key (`$.memory[...].slope`).
`benchmarks/codec_speed.py` measures the ways side by side (docs/benchmarks.md): 4,800
result.json files of a fake-runtime sweep read in 3.73 s by `json.loads` and the
checking decoder, 1.17 s by `parse` and this (3.2x), 0.84 s by msgspec alone, which
read none of the 100 schema-2 files among the recorded H100 results.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Callable, Mapping

import msgspec

from harness.result import checked
from harness.result.checked import JSON, DecodeError, as_json

__all__ = ["JSON", "DecodeError", "as_json", "decode", "encode", "parse"]
T = typing.TypeVar("T")


# Both directions are compiled once per type into a function (a dict lookup and a call
# per value after that): a report of 1,600 cells decodes and encodes ~400,000 values,
# and asking each value's type its shape again was most of `harness report`'s time.

Encoder = Callable[[object], "JSON"]
_ENCODERS: dict[type, Encoder] = {}


def encode(value: object) -> JSON:
    """A JSON value for a typed one (dataclass fields in order)."""
    try:
        return _ENCODERS[type(value)](value)
    except KeyError:
        return _encoder(type(value), value)(value)


def _same(value: object) -> JSON:
    return value        # type: ignore[return-value]  # None, bool, str: JSON as they are


def _int(value: object) -> JSON:
    return int(value)   # type: ignore[call-overload, no-any-return]


def _float(value: object) -> JSON:
    f = float(value)    # type: ignore[arg-type]
    return f if math.isfinite(f) else None


def _mapping(value: object) -> JSON:
    return {str(k): encode(v) for k, v in value.items()}    # type: ignore[attr-defined]


def _sequence(value: object) -> JSON:
    return [encode(v) for v in value]       # type: ignore[attr-defined]


def _scalar(value: object) -> JSON:
    return encode(value.item())             # type: ignore[attr-defined]  # a NumPy scalar


def _record(names: tuple[str, ...], extra: bool) -> Encoder:
    def record(value: object) -> JSON:
        out = {name: encode(getattr(value, name)) for name in names}
        if extra:       # derived values for a reader
            out.update({k: encode(v) for k, v in value.json_extra().items()})  # type: ignore[attr-defined]
        return out
    return record


def _encoder(cls: type, value: object) -> Encoder:
    """The encoder of values of `cls`, made once."""
    found: Encoder
    if value is None or issubclass(cls, (bool, str)):
        found = _same
    elif issubclass(cls, int):
        found = _int
    elif issubclass(cls, float):
        found = _float
    elif dataclasses.is_dataclass(cls):
        found = _record(tuple(f.name for f in dataclasses.fields(cls)),
                        callable(getattr(cls, "json_extra", None)))
    elif issubclass(cls, Mapping):
        found = _mapping
    elif issubclass(cls, (list, tuple)):
        found = _sequence
    elif callable(getattr(value, "item", None)):
        found = _scalar
    else:
        raise TypeError(f"cannot encode {cls.__name__}")
    _ENCODERS[cls] = found
    return found


def parse(raw: bytes) -> JSON:
    """The JSON value in `raw` (UTF-8), as `json.loads` reads it: msgspec's parser (the
    quicker), and Python's where msgspec refuses the text (NaN and Infinity, a number
    past a float's range, a lone surrogate: Python's reader takes them).

    Raises:
        ValueError: not JSON (`json.JSONDecodeError`), or not UTF-8.
    """
    try:
        found: JSON = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        found = json.loads(raw.decode("utf-8"))
    return found


# Types msgspec cannot take (a union of two records, say): the hand-made decoder alone.
_REFUSED: set[type] = set()


def _fits(value: object, required: typing.Collection[str]) -> bool:
    """`value` is a mapping holding every path of `required`."""
    if not isinstance(value, dict):
        return False
    for path in required:
        at: object = value
        for key in path.split("."):
            if not isinstance(at, dict) or key not in at:
                return False
            at = at[key]
    return True


def decode(cls: type[T], value: object, path: str = "",
           required: typing.Collection[str] = (),
           skip: Callable[[DecodeError], None] | None = None, parsed: bool = False) -> T:
    """A `cls` (a dataclass) from a JSON object; see the module docstring.

    Args:
        path: Where `value` stands, for the errors' paths.
        required: Paths inside `value` of fields that must be there ("id",
            "image.label"); a missing field of any other reads as its default or its
            type's empty value.
        skip: Given, a field of `cls` whose value does not fit is passed over as if it
            were missing, and its error handed to `skip` (input from outside the harness,
            where one bad field must not lose the rest).
        parsed: `value` is as JSON text parsed (`json.loads`): it holds nothing but
            JSON values, so msgspec may build it (it takes a free-form field as it
            finds it; the checking decoder checks that field holds JSON, for a value
            built in memory).

    Raises:
        DecodeError: a value does not fit its field's type (without `skip`), or a
            required one is missing.
    """
    if parsed and cls not in _REFUSED and _fits(value, required):
        try:
            return msgspec.convert(value, cls)
        except msgspec.ValidationError:
            pass        # the checking decoder reads it leniently, or says where it is bad
        except TypeError:
            _REFUSED.add(cls)
    return checked.decode(cls, value, path, required, skip)
