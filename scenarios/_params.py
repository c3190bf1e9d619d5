"""Shared parameter parsing for the scenario scripts in this folder.

Each scenario keeps its own ``_PARAM_SPEC`` table, ``{name: (default, kind)}``, and calls
``parse(scenario_name, params, _PARAM_SPEC)``, which returns ``{name: parsed value}`` for
every name in the table (in its order), or raises ValueError naming the scenario, the
param and the allowed values. Unknown param names are an error too.

Kinds:
  "bool"                      true | false (also 1 | 0 | yes | no, any case; bools; ints 0/1)
  ("int", minimum)            an integer >= minimum; bools rejected; a float is truncated by int()
  ("int_strict", minimum)     the same, but a float with a fractional part is rejected
  ("int_or_autotune", minimum) like int_strict, or -1 / "autotune" / "auto" (-> AUTOTUNE)
  "int_any"                   anything int() takes ("an int"; no bound)
  ("float_gt", bound)         anything float() takes that is > bound
  "size"                      "HxW" or "HxWxC" (or a list) of positive ints, C in 1, 3, 4
                              (C defaults to 3) -> a tuple (H, W, C)
  a tuple of strings          one of them, case-insensitive, surrounding spaces ignored
                              (-> the lower-cased string)

Stdlib only and Python 3.6 syntax: the scenarios run inside old TF / Python containers. The
harness agent puts a scenario's own directory first on sys.path (and mounts the whole
directory into containers), so scenarios can ``import _params``.
"""

AUTOTUNE = -1

_BOOL_WORDS = ("true", "false", "1", "0", "yes", "no")
_TRUE_WORDS = ("true", "1", "yes")
_NUMBER_KINDS = ("int", "int_strict", "int_or_autotune", "float_gt")


def _error(scenario, name, value, allowed):
    return ValueError("{}: param {!r} got {!r}; allowed values: {}".format(scenario, name, value, allowed))


def as_bool(scenario, name, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise ValueError("{}: param {!r} must be true or false, got {!r}".format(scenario, name, value))


def as_int(scenario, name, value, minimum, strict=False, autotune=False):
    try:
        if isinstance(value, bool):
            raise ValueError()
        if autotune and isinstance(value, str) and value.strip().lower() in ("autotune", "auto"):
            return AUTOTUNE
        ivalue = int(value)
        if strict and isinstance(value, float) and value != ivalue:
            raise ValueError()
    except (TypeError, ValueError):
        ivalue = None
    if ivalue is None or not (ivalue >= minimum or (autotune and ivalue == AUTOTUNE)):
        raise _error(scenario, name, value, "an integer >= {}{}".format(
            minimum, " or -1 / autotune" if autotune else ""))
    return ivalue


def as_size(scenario, name, value):
    try:
        if isinstance(value, (list, tuple)):
            dims = [int(x) for x in value]
        else:
            dims = [int(x) for x in str(value).lower().replace(",", "x").split("x") if x.strip()]
        if len(dims) == 2:
            dims.append(3)
        if len(dims) != 3 or min(dims) < 1 or dims[2] not in (1, 3, 4):
            raise ValueError()
    except (TypeError, ValueError):
        dims = None
    if dims is None:
        raise _error(scenario, name, value, "'HxW' or 'HxWxC' with positive ints and C in 1, 3, 4 "
                                            "(e.g. 720x1280x3)")
    return tuple(dims)


def parse_value(scenario, name, value, kind):
    """One param's value, parsed by ``kind`` (see the module docstring)."""
    if kind == "bool":
        return as_bool(scenario, name, value)
    if kind == "size":
        return as_size(scenario, name, value)
    if kind == "int_any":
        try:
            return int(value)
        except (TypeError, ValueError):
            pass
        raise _error(scenario, name, value, "an int")
    if isinstance(kind, tuple) and len(kind) == 2 and kind[0] in _NUMBER_KINDS \
            and not isinstance(kind[1], str):
        if kind[0] == "float_gt":
            try:
                fvalue = float(value)
                if fvalue > kind[1]:
                    return fvalue
            except (TypeError, ValueError):
                pass
            raise _error(scenario, name, value, "a float > {}".format(kind[1]))
        return as_int(scenario, name, value, kind[1], strict=kind[0] != "int",
                      autotune=kind[0] == "int_or_autotune")
    if isinstance(kind, tuple) and kind and all(isinstance(c, str) for c in kind):
        sval = str(value).strip().lower()
        if sval not in kind:
            raise _error(scenario, name, value, " | ".join(kind))
        return sval
    raise TypeError("{}: param {!r} has an unknown kind {!r} in its spec".format(scenario, name, kind))


def parse(scenario, params, spec):
    """{name: parsed value} for every name in ``spec`` ({name: (default, kind)})."""
    params = dict(params or {})
    unknown = sorted(k for k in params if k not in spec)
    if unknown:
        raise ValueError("{}: unknown param(s) {}; allowed params: {}".format(
            scenario, ", ".join(repr(k) for k in unknown), ", ".join(sorted(spec))))
    out = {}
    for name, (default, kind) in spec.items():
        out[name] = parse_value(scenario, name, params.get(name, default), kind)
    return out
