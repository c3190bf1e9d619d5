"""Schema 1, checked one record at a time: what a `sample` must carry (`valid_sample`,
which also normalises its numbers) and the types of the `header` and `end` fields the
host reads (`HEADER_TYPES`, `END_TYPES`; `checked` drops a field of the wrong type with
a problem). The reader (`ingest.SeriesReader`) decides what a failed check costs.
"""

from __future__ import annotations

import array
import binascii
import math
import sys
from typing import Any

from harness.protocol.series import CONTENTION_FIELDS, GPU_ACTIVITY_FIELDS, MEMORY_SOURCES


def valid_sample(rec: dict[str, Any]) -> str | None:
    if not isinstance(rec.get("i"), int) or isinstance(rec.get("i"), bool):
        return "sample without integer 'i'"
    if rec.get("src") not in ("step", "timer", "user"):
        return "sample with unknown 'src'"
    if not isinstance(rec.get("phase"), str):
        return "sample without 'phase'"
    for key in (*MEMORY_SOURCES, "t"):
        v = rec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                              or not math.isfinite(v) or v < 0):
            return f"sample field {key!r} is not a non-negative number"
    for key in GPU_ACTIVITY_FIELDS:
        v = rec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0
                              or (key == "gpu_util" and v > 100)):
            return f"sample {key!r} is not a non-negative integer" + (
                " up to 100" if key == "gpu_util" else "")
    if rec["src"] == "user":
        # The steps timed as the user's interpreter runs them (the agent's --as-user): per
        # interval their count and summed seconds, the clock's reads in them.
        steps, total = rec.get("steps"), rec.get("dt_s")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            return "sample 'steps' is not a positive integer"
        if isinstance(total, bool) or not isinstance(total, int | float) or not (
                math.isfinite(total) and total >= 0):
            return "sample 'dt_s' is not a non-negative number"
        rec["dt_s"] = float(total)
        return _timing(rec)
    if rec["src"] == "step":
        clock = rec.get("clock_s")
        if "dt_b64" in rec and (clock is None or (
                isinstance(clock, int | float) and not isinstance(clock, bool)
                and math.isfinite(clock) and clock >= 0)):
            # seconds as little-endian float64 in base64 (this agent), less the clock's
            # own reads, at C speed (a trivial step's 600,000 times a run: a list
            # comprehension was half the plugin's analysis of it)
            dt = _float64s(rec.pop("dt_b64"), None if clock is None else float(clock))
            if dt is None:
                return "sample 'dt_b64' is not base64 of non-negative float64 seconds"
            rec["dt"] = dt
            clock = None
        elif "dt_b64" in rec:
            return "sample 'clock_s' is not a non-negative number"
        elif "dt_ns" in rec:    # whole ns (agents before it); `dt`, seconds, before those
            ns = rec.pop("dt_ns")
            if not isinstance(ns, list) or not _numbers(ns, int):
                return "sample 'dt_ns' is not a list of non-negative integers"
            rec["dt"] = list(map(_SECONDS, ns))
        else:
            dt = rec.get("dt", [])
            if not isinstance(dt, list) or not _numbers(dt):
                return "sample 'dt' is not a list of non-negative numbers"
            rec["dt"] = list(map(float, dt))
        if clock is not None:
            if isinstance(clock, bool) or not isinstance(clock, int | float) or not (
                    math.isfinite(clock) and clock >= 0):
                return "sample 'clock_s' is not a non-negative number"
            # The step times as the step took them: less what the clock's own reads
            # added to each (fields.STEP), never below a nanosecond.
            rec["dt"] = [t - clock if t - clock > _NS else _NS for t in rec["dt"]]
        problem = _timing(rec)
        if problem is not None:
            return problem
        cpu = rec.get("cpu")
        if cpu is not None:
            if not isinstance(cpu, list) or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                    and x >= 0 for x in cpu):
                return "sample 'cpu' is not a list of non-negative numbers"
            rec["cpu"] = [float(x) for x in cpu]
    return None


def _timing(rec: dict[str, Any]) -> str | None:
    """What a step or user sample measured of its interval (CPU time, the clock's cost,
    contention), each a non-negative number (an integer where it counts); None where
    all are, normalised."""
    for key, integral in (("cpu_s", False), ("clock_s", False), *CONTENTION_FIELDS.items()):
        v = rec.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not (
                math.isfinite(v) and v >= 0) or (integral and not isinstance(v, int)):
            kind = "integer" if integral else "number"
            return f"sample {key!r} is not a non-negative {kind}"
        rec[key] = v if integral else float(v)
    return None


def _numbers(values: list[Any], *kinds: type) -> bool:
    """Every value a finite non-negative number (of `kinds`: int, float where none is
    given), not a bool. A run's step times are tens of thousands a check: the plain
    floats and ints JSON gives are checked at C speed (`type` is exact, so a bool is
    neither), anything else one by one."""
    allowed = set(kinds or (float, int))
    if set(map(type, values)) <= allowed:
        return ((allowed == {int} or all(map(math.isfinite, values)))
                and (not values or min(values) >= 0))
    return not kinds and all(isinstance(x, int | float) and not isinstance(x, bool)
                             and math.isfinite(x) and x >= 0 for x in values)


_SECONDS = (1e9).__rtruediv__   # ns -> s: ns / 1e9
_NS = 1e-9


def _float64s(text: Any, clock: float | None = None) -> list[float] | None:
    """The step times of a `dt_b64` (`agent.writer.step_times`), each less `clock` (the
    clock's own reads) and never below a nanosecond where `clock` is given; None where
    it is not base64 of finite non-negative little-endian float64s."""
    if not isinstance(text, str):
        return None
    try:
        raw = binascii.a2b_base64(text)
    except (binascii.Error, ValueError):
        return None
    if len(raw) % 8:
        return None
    values = array.array("d", raw)
    if sys.byteorder != "little":
        values.byteswap()
    if clock is None:
        out = values.tolist()
        # (at C speed: a NaN or an infinity makes the sum one)
        if out and not (math.isfinite(sum(out)) and min(out) >= 0):
            return None
        return out
    import numpy as np  # lazy: a sweep reaches its first container without it

    times = np.frombuffer(values, dtype=np.float64)
    if times.size and not (np.isfinite(times).all() and times.min() >= 0):
        return None
    kept: list[float] = np.maximum(times - clock, _NS).tolist()
    return kept


_STR = (str,)
_NUM = (int, float)
# Header and end fields the host reads, with the types schema 1 gives them.
HEADER_TYPES: dict[str, tuple[type, ...]] = {
    "scenario": _STR, "params": (dict,), "config": (dict,), "python": _STR,
    "implementation": _STR, "platform": _STR, "machine": _STR, "hostname": _STR,
    "pid": (int,), "time": _NUM, "env": (dict,), "packages": (dict,), "heap": (dict,),
    "pythonmalloc": _STR, "heap_mode": _STR, "cgroup": (*_STR, int), "gpu": (dict,),
    "gpu_reason": _STR, "cpu_count": (int,)}
END_TYPES: dict[str, tuple[type, ...]] = {
    "error": (dict,), "info": (dict,), "phases": (dict,), "iterations": (int,),
    "warmup": (int,), "stopped_early": (bool,), "mode": _STR, "elapsed_s": _NUM,
    "sampling_s": _NUM, "teardown_error": _STR, "collected": (dict,), "params_read": (list,),
    "output_dropped": (int,), "budget_spent": (bool,), "memory_stop": (dict,),
    "budget_capped": (bool,), "rss_hwm": (int,), "cell_s": _NUM,
    "times_s": _NUM, "sampling_own_s": _NUM, "as_user": (dict,)}


def checked(rec: dict[str, Any], types: dict[str, tuple[type, ...]], what: str,
             problems: list[str]) -> dict[str, Any]:
    """`rec` without the fields whose type schema 1 does not allow (None is allowed)."""
    out: dict[str, Any] = {}
    for key, value in rec.items():
        want = types.get(key)
        bad = want is not None and value is not None and (
            not isinstance(value, want) or (isinstance(value, bool) and bool not in want))
        if bad:
            problems.append(f"{what} field {key!r} has the wrong type; dropped")
        else:
            out[key] = value
    if what == "header":
        for key in ("env", "packages"):
            if isinstance(out.get(key), dict) and not all(
                    isinstance(v, str) for v in out[key].values()):
                problems.append(f"header field {key!r} is not a mapping of strings; dropped")
                del out[key]
        gpu = out.get("gpu")
        if gpu is not None and not (isinstance(gpu.get("devices", []), list) and all(
                isinstance(d, dict) for d in gpu.get("devices", []))):
            problems.append("header field 'gpu' has malformed devices; dropped")
            del out["gpu"]
    if what == "end" and isinstance(out.get("error"), dict):
        out["error"] = {k: v if k == "call" else str(v) for k, v in out["error"].items()
                        if k in ("type", "message", "traceback", "fault", "phase")
                        or (k == "call" and isinstance(v, int))}
    if what == "end" and out.get("status") == "error" and not isinstance(out.get("error"), dict):
        out["error"] = {"type": "error", "message": "the end record's error was malformed"}
    return out
