"""Typed values <-> JSON for the result model. `encode`: fields in order, then `json_extra()`;
tuples as lists, NaN and infinities as null. `decode` reads old records leniently (missing:
the default or the type's empty value; unknown keys ignored), naming a bad value's path.
Parsed JSON text tries msgspec first (fast, strict); what it rejects goes to
`decode_checked`, which is lenient and names the key.
"""

from __future__ import annotations

import dataclasses
import json
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

import msgspec

if TYPE_CHECKING:
    JSON: TypeAlias = str | int | float | bool | list["JSON"] | dict[str, "JSON"] | None
else:
    # At run time a free-form JSON field is `Any` to msgspec; this decoder checks it.
    JSON = typing.Any


T = TypeVar("T")


class DecodeError(ValueError):
    """A JSON value that does not fit the type; `path` says where."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path or '(top)'}: {message}")
        self.path = path
        self.message = message

    def within(self, key: str) -> DecodeError:
        """The same error seen from its container, under `key` (a field or "[i]")."""
        if not self.path:
            return DecodeError(key, self.message)
        sep = "" if self.path.startswith("[") else "."
        return DecodeError(f"{key}{sep}{self.path}", self.message)


def _what(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json(value: object, path: str) -> JSON:
    try:
        return _free(value)
    except DecodeError as exc:
        raise (exc.within(path) if path else exc) from None


def _free(value: object) -> JSON:
    """A free-form JSON value as it is, checked; errors name the path inside it."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        out: list[JSON] = []
        for i, v in enumerate(value):
            try:
                out.append(_free(_plain(v)))
            except DecodeError as exc:
                raise exc.within(f"[{i}]") from None
        return out
    if isinstance(value, dict):
        items: dict[str, JSON] = {}
        for k, v in value.items():
            try:
                items[str(k)] = _free(_plain(v))
            except DecodeError as exc:
                raise exc.within(str(k)) from None
        return items
    raise DecodeError("", f"not a JSON value: {_what(value)}")


def _plain(value: object) -> object:
    """NumPy scalars as numbers, tuples as lists."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (list, dict, str)):
        value = item()
    if isinstance(value, tuple):
        value = list(value)
    return value


def as_json(value: object, path: str = "") -> JSON:
    """`value` as a JSON value (dicts, lists, text, numbers, None), or DecodeError naming
    where it is not one. NumPy scalars become numbers."""
    return _json(_plain(value), path)


# (value, required paths) -> the typed value, or DecodeError; each level adds its key on
# the way out, so a path is built only for an error.
Decoder = Callable[[object, tuple[str, ...]], object]
_DECODERS: dict[object, Decoder] = {}


def _decoder(tp: object) -> Decoder:
    try:
        return _DECODERS[tp]
    except KeyError:
        found = _DECODERS[tp] = _build(tp)
        return found
    except TypeError:       # an unhashable annotation
        return _build(tp)


def _fail(message: str) -> DecodeError:
    return DecodeError("", message)


def _d_str(value: object, required: tuple[str, ...]) -> object:
    if isinstance(value, str):
        return value
    raise _fail(f"expected text, got {_what(value)}")


def _d_float(value: object, required: tuple[str, ...]) -> object:
    if isinstance(value, float):
        return value
    if value is None:       # NaN and infinities are written as null
        return math.nan
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    raise _fail(f"expected a number, got {_what(value)}")


def _d_int(value: object, required: tuple[str, ...]) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _fail(f"expected a whole number, got {_what(value)}")


def _d_bool(value: object, required: tuple[str, ...]) -> object:
    if isinstance(value, bool):
        return value
    raise _fail(f"expected true or false, got {_what(value)}")


def _d_json(value: object, required: tuple[str, ...]) -> object:
    return _free(value)


def _d_object(value: object, required: tuple[str, ...]) -> object:
    return value


def _d_union(options: tuple[object, ...]) -> Decoder:
    nullable = type(None) in options
    decoders = [_decoder(o) for o in options if o is not type(None)]
    if nullable and len(decoders) == 1:     # `T | None`, the usual union
        (only,) = decoders

        def optional(value: object, required: tuple[str, ...]) -> object:
            return None if value is None else only(value, required)
        return optional

    def union(value: object, required: tuple[str, ...]) -> object:
        if value is None:
            if nullable:
                return None
            raise _fail("expected a value, got null")
        first: DecodeError | None = None
        for decoder in decoders:
            try:
                return decoder(value, required)
            except DecodeError as exc:
                first = first or exc
        assert first is not None
        raise first
    return union


def _d_literal(args: tuple[object, ...]) -> Decoder:
    def literal(value: object, required: tuple[str, ...]) -> object:
        if value in args:
            return value
        raise _fail(f"expected one of {', '.join(map(str, args))}, got {_what(value)}")
    return literal


def _d_items(item: Decoder, as_tuple: bool) -> Decoder:
    def items(value: object, required: tuple[str, ...]) -> object:
        if not isinstance(value, (list, tuple)):
            raise _fail(f"expected a list, got {_what(value)}")
        out = []
        for i, v in enumerate(value):
            try:
                out.append(item(v, ()))
            except DecodeError as exc:
                raise exc.within(f"[{i}]") from None
        return tuple(out) if as_tuple else out
    return items


def _d_fixed(parts: list[Decoder]) -> Decoder:
    def fixed(value: object, required: tuple[str, ...]) -> object:
        if not isinstance(value, (list, tuple)):
            raise _fail(f"expected a list, got {_what(value)}")
        if len(parts) != len(value):
            raise _fail(f"expected {len(parts)} items, got {len(value)}")
        out = []
        for i, (part, v) in enumerate(zip(parts, value, strict=True)):
            try:
                out.append(part(v, ()))
            except DecodeError as exc:
                raise exc.within(f"[{i}]") from None
        return tuple(out)
    return fixed


def _d_dict(item: Decoder) -> Decoder:
    def mapping(value: object, required: tuple[str, ...]) -> object:
        if not isinstance(value, dict):
            raise _fail(f"expected a mapping, got {_what(value)}")
        out = {}
        for k, v in value.items():
            try:
                out[str(k)] = item(v, ())
            except DecodeError as exc:
                raise exc.within(str(k)) from None
        return out
    return mapping


def _build(tp: object) -> Decoder:
    """The decoder of `tp`, made once per type."""
    simple: dict[object, Decoder] = {str: _d_str, float: _d_float, int: _d_int,
                                     bool: _d_bool, JSON: _d_json, object: _d_object}
    if tp in simple:
        return simple[tp]
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        return _d_union(args)
    if origin is Literal:
        return _d_literal(args)
    if origin in (list, tuple):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return _d_fixed([_decoder(a) for a in args])
        return _d_items(_decoder(args[0]), origin is tuple)
    if origin is dict:
        return _d_dict(_decoder(args[1]))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _Record(tp)
    raise DecodeError("", f"no decoder for {tp!r}")


class _Record:
    """A dataclass's decoder; field decoders are made lazily (a class may name itself)."""

    def __init__(self, cls: type):
        self.cls = cls
        self.from_text = getattr(cls, "from_text", None)
        self.fields: list[tuple[str, bool, object, Decoder]] | None = None
        self.inner: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}

    def _fields(self) -> list[tuple[str, bool, object, Decoder]]:
        if self.fields is None:
            hints = get_type_hints(self.cls)
            self.fields = [(f.name, f.default is dataclasses.MISSING
                            and f.default_factory is dataclasses.MISSING,
                            hints[f.name], _decoder(hints[f.name]))
                           for f in dataclasses.fields(self.cls) if f.init]
        return self.fields

    def _inner(self, required: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Per field, the required paths inside it, once per `required`."""
        found = self.inner.get(required)
        if found is None:
            found = self.inner[required] = {
                name: tuple(r[len(name) + 1:] for r in required if r.startswith(name + "."))
                for name, *_ in self._fields()}
        return found

    def __call__(self, value: object, required: tuple[str, ...] = (),
                 skip: Callable[[DecodeError], None] | None = None) -> object:
        if isinstance(value, str) and callable(self.from_text):   # older files kept it as text
            return self.from_text(value)
        if not isinstance(value, dict):
            raise _fail(f"expected a mapping, got {_what(value)}")
        kwargs: dict[str, object] = {}
        fields = self.fields or self._fields()
        if not (required or skip):      # the common case, with the least work per field
            name = ""
            try:
                for name, needed, tp, decoder in fields:
                    if name in value:
                        kwargs[name] = decoder(value[name], ())
                    elif needed:
                        kwargs[name] = _empty(tp)
            except DecodeError as exc:
                raise exc.within(name) from None
            return self.cls(**kwargs)
        inner = self._inner(required) if required else None
        for name, needed, tp, decoder in fields:
            if name in value:
                try:
                    kwargs[name] = decoder(value[name], inner[name] if inner else ())
                    continue
                except DecodeError as exc:
                    if skip is None:
                        raise exc.within(name) from None
                    skip(exc.within(name))
            if name in required:
                raise DecodeError(name, "missing")
            if needed:
                try:
                    kwargs[name] = _empty(tp)
                except DecodeError as exc:
                    raise exc.within(name) from None
        return self.cls(**kwargs)


def _empty(tp: object) -> object:
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
        return _decoder(tp)({}, ())
    raise _fail("missing")


def decode_checked(cls: type[T], value: object, path: str = "",
                   required: typing.Collection[str] = (),
                   skip: Callable[[DecodeError], None] | None = None) -> T:
    """A `cls` from a JSON object, checked value by value; arguments as `decode`'s.

    Raises:
        DecodeError: a value does not fit (without `skip`), or a required one is missing.
    """
    decoder = _decoder(cls)
    assert isinstance(decoder, _Record), cls
    try:
        found: T = decoder(value, tuple(required), skip)    # type: ignore[assignment]
    except DecodeError as exc:
        raise (exc.within(path) if path else exc) from None
    return found



# Both directions are compiled once per type: a large report handles ~10^5 values.

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
    """The JSON value in `raw` (UTF-8), as `json.loads` reads it: msgspec's parser, or
    Python's for what msgspec refuses (NaN, huge numbers, lone surrogates).

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
    """A `cls` (a dataclass) from a JSON object, read leniently (see the module).

    Args:
        path, required: Where `value` stands, for errors; paths that must be there ("id").
        skip: Given, a bad field reads as missing and its error goes to `skip`.
        parsed: `value` came from JSON text, so msgspec may build it.

    Raises: DecodeError: a value does not fit (without `skip`), or a required one is missing.
    """
    if parsed and cls not in _REFUSED and _fits(value, required):
        try:
            return msgspec.convert(value, cls)
        except msgspec.ValidationError:
            pass        # the checking decoder reads it leniently, or says where it is bad
        except TypeError:
            _REFUSED.add(cls)
    return decode_checked(cls, value, path, required, skip)
