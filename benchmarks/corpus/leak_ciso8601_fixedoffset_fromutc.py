"""ciso8601's C `FixedOffset` tzinfo (the type of every non-UTC offset it parses)
leaks a `timedelta` each time a datetime is converted into it. 2.3.0 gave the type
its own `fromutc` (before, `tzinfo.fromutc`'s generic one ran), which returns
`PyNumber_Add(dt, FixedOffset_utcoffset(self, self))`: the `timedelta` that
`utcoffset()` builds is never released. `datetime.astimezone(tz)` calls
`tz.fromutc()`, so converting any aware datetime to a parsed offset leaks one
48-byte object. 2.3.3 keeps the delta and drops it (PR 172, "Fix memory leak in
FixedOffset_fromutc").

2.3.0 is the first release with that `fromutc` and also the first with a CPython
3.11 wheel (2.2.0 has no 3.11 wheel), so there is no good release on 3.11; the pair
is bad and fixed only, as leak_greenlet_switch_py311 is.

The scenario parses two timestamps with different offsets and converts the first to
the second's tzinfo; what leaks per call is the one `timedelta`.

Truth: benchmarks/corpuskit/truth.py leak_ciso8601_fixedoffset_fromutc --calls 20000
(20000 calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc,
tcache off).
It measured 48.5 B/call in 2.3.0 (48.0 in the second half, RSS +33 B/call) and 0.1 in
2.3.3.
"""

CASE = {
    "title": "ciso8601: astimezone() to a parsed FixedOffset leaks a timedelta (2.3.0)",
    "kind": "leak",
    "link": "https://github.com/closeio/ciso8601/pull/172",
    "package": "ciso8601",
    "versions": {"good": None, "bad": "2.3.0", "fixed": "2.3.3"},
    "extra": [],
    "params": {"src": "2020-01-01T00:00:00+01:00", "dst": "2020-01-01T00:00:00+02:00"},
    "truth": {
        "2.3.0": {"b_per_call": 48.5, "b_per_call_2nd_half": 48.0, "us_per_call": 1.43},
        "2.3.3": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 0.82},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_ciso8601_fixedoffset_fromutc --calls 20000: "
        "a plain loop in each release's venv, 200 warm-up calls, then 20000 calls; "
        "glibc heap in use (mallinfo2) after gc.collect() before, at the half and "
        "after, PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49",
}


def setup(params):
    import ciso8601

    src = ciso8601.parse_datetime(params.get("src", "2020-01-01T00:00:00+01:00"))
    dst = ciso8601.parse_datetime(params.get("dst", "2020-01-01T00:00:00+02:00"))
    return {"dt": src, "tz": dst.tzinfo}


def step(state):
    return state["dt"].astimezone(state["tz"])
