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
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import (
    TYPE_CHECKING,
    Literal,
    TypeAlias,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

if TYPE_CHECKING:
    JSON: TypeAlias = str | int | float | bool | list["JSON"] | dict[str, "JSON"] | None
else:
    class JSON:
        """At run time, the marker the decoder knows a free-form JSON field by."""
T = TypeVar("T")


class DecodeError(ValueError):
    """A JSON value that does not fit the type; `path` says where."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path or '(top)'}: {message}")
        self.path = path


def encode(value: object) -> JSON:
    """A JSON value for a typed one (dataclass fields in order)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    names = _NAMES.get(type(value))
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _NAMES[type(value)] = tuple(f.name for f in dataclasses.fields(value))
    if names is not None:
        out = {name: encode(getattr(value, name)) for name in names}
        extra = getattr(value, "json_extra", None)    # derived values for a reader
        if callable(extra):
            out.update({k: encode(v) for k, v in extra().items()})
        return out
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    item = getattr(value, "item", None)   # a NumPy scalar
    if callable(item):
        return encode(item())
    raise TypeError(f"cannot encode {type(value).__name__}")


_NAMES: dict[type, tuple[str, ...]] = {}   # a dataclass's field names, once per class
_HINTS: dict[type, dict[str, object]] = {}
_SHAPES: dict[object, tuple[object, tuple[object, ...]]] = {}
_FIELDS: dict[type, list[tuple[str, bool]]] = {}


def _hints(cls: type) -> dict[str, object]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _at(path: str, key: object) -> str:
    """The path of `key` inside `path` ("memory" + "heap" -> "memory.heap")."""
    return f"{path}.{key}" if path else str(key)


def _what(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _empty(tp: object, path: str) -> object:
    """The value a missing field of type `tp` (without a default) reads as."""
    origin = get_origin(tp)
    if tp is type(None) or (origin in (Union, types.UnionType)
                            and type(None) in get_args(tp)):
        return None
    if tp is JSON:
        return None
    if tp is str:
        return ""
    if tp is bool:
        return False
    if tp is int:
        return 0
    if tp is float:
        return 0.0
    if origin is tuple:
        return ()
    if origin is list:
        return []
    if origin is dict:
        return {}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return decode(tp, {}, path)
    raise DecodeError(path, "missing")


def _json(value: object, path: str) -> JSON:
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [as_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): as_json(v, _at(path, k)) for k, v in value.items()}
    raise DecodeError(path, f"not a JSON value: {_what(value)}")


def as_json(value: object, path: str = "") -> JSON:
    """`value` as a JSON value (dicts, lists, text, numbers, None), or DecodeError naming
    where it is not one. NumPy scalars become numbers."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (list, dict, str)):
        value = item()
    if isinstance(value, tuple):
        value = list(value)
    return _json(value, path)


def _shape(tp: object) -> tuple[object, tuple[object, ...]]:
    """(get_origin, get_args) of a type, worked out once per type: decoding 1,600
    result.json files asks the same few dozen types hundreds of thousands of times."""
    try:
        return _SHAPES[tp]
    except KeyError:
        found = _SHAPES[tp] = (get_origin(tp), get_args(tp))
        return found
    except TypeError:       # an unhashable annotation
        return get_origin(tp), get_args(tp)


def _fields(cls: type) -> list[tuple[str, bool]]:
    """(name, needs a value) of each init field of a dataclass, once per class."""
    if cls not in _FIELDS:
        _FIELDS[cls] = [(f.name, f.default is dataclasses.MISSING
                         and f.default_factory is dataclasses.MISSING)
                        for f in dataclasses.fields(cls) if f.init]
    return _FIELDS[cls]


def _decode(tp: object, value: object, path: str,
            required: typing.Collection[str] = ()) -> object:
    if tp is str and isinstance(value, str):     # the common cases first
        return value
    if tp is float and isinstance(value, float):
        return value
    origin, args = _shape(tp)
    if tp is JSON:
        return _json(value, path)
    if tp is object:
        return value
    if origin in (Union, types.UnionType):
        options = args
        if value is None:
            if type(None) in options:
                return None
            raise DecodeError(path, "expected a value, got null")
        errors: list[DecodeError] = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode(option, value, path, required)
            except DecodeError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is Literal:
        if value in args:
            return value
        raise DecodeError(path, f"expected one of {', '.join(map(str, args))}, "
                                f"got {_what(value)}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise DecodeError(path, f"expected true or false, got {_what(value)}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise DecodeError(path, f"expected a whole number, got {_what(value)}")
    if tp is float:
        if value is None:       # NaN and infinities are written as null
            return math.nan
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise DecodeError(path, f"expected a number, got {_what(value)}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise DecodeError(path, f"expected text, got {_what(value)}")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise DecodeError(path, f"expected a list, got {_what(value)}")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise DecodeError(path, f"expected {len(args)} items, got {len(value)}")
            return tuple(_decode(a, v, f"{path}[{i}]")
                         for i, (a, v) in enumerate(zip(args, value, strict=True)))
        items = [_decode(args[0], v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise DecodeError(path, f"expected a mapping, got {_what(value)}")
        _, vt = args
        return {str(k): _decode(vt, v, _at(path, k))
                for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return decode(tp, value, path, required)
    raise DecodeError(path, f"no decoder for {tp!r}")


def decode(cls: type[T], value: object, path: str = "",
           required: typing.Collection[str] = (),
           skip: Callable[[DecodeError], None] | None = None) -> T:
    """A `cls` (a dataclass) from a JSON object; see the module docstring.

    Args:
        required: Paths of fields that must be there ("id", "image.label"); a missing
            field of any other reads as its default or its type's empty value.
        skip: Given, a field of `cls` whose value does not fit is passed over as if it
            were missing, and its error handed to `skip` (input from outside the harness,
            where one bad field must not lose the rest).

    Raises:
        DecodeError: a value does not fit its field's type (without `skip`), or a
            required one is missing.
    """
    from_text = getattr(cls, "from_text", None)
    if isinstance(value, str) and callable(from_text):   # a record older files kept as text
        found: T = from_text(value)
        return found
    if not isinstance(value, dict):
        raise DecodeError(path, f"expected a mapping, got {_what(value)}")
    hints = _hints(cls)
    kwargs: dict[str, object] = {}
    for name, needed in _fields(cls):
        where = _at(path, name)
        tp = hints[name]
        if name in value:
            try:
                kwargs[name] = _decode(tp, value[name], where, required)
                continue
            except DecodeError as exc:
                if skip is None:
                    raise
                skip(exc)
        if where in required:
            raise DecodeError(where, "missing")
        if needed:
            kwargs[name] = _empty(tp, where)
    return cls(**kwargs)
