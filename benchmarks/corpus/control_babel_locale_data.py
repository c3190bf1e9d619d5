"""Control: babel loads a locale's CLDR data on first use (babel.localedata.load unpickles
the locale's .dat file, merges it over its parents' and keeps the result in
localedata._cache for good). Each call formats a number; every 12th call moves to the
next of the first 160 locale identifiers, so 160 locales (~200 KiB each with what their
parents add) load one by one: the heap rises at ~16 KiB/call on average (in steps of one
locale every 12 calls) for 1920 calls, then stays flat. Truth "no leak": heap flat once
the 160 locales are loaded (+0.1 B/call over 3000 calls after a 2400-call warm-up). With
harness's 200-call warm-up the heap grew 9.2 KiB/call on average over the next 3000
calls (~26 MiB), 95% of it by call ~1850, nothing after ~2100.
"""

CASE = {
    "title": "control: babel locale data cache over 160 locales",
    "kind": "control",
    "link": "https://babel.pocoo.org/en/latest/api/core.html#babel.core.Locale",
    "package": "babel",
    "versions": {"good": "2.16.0"},
    "extra": [],
    "params": {},
    "truth": {
        "2.16.0": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.03, "us_per_call": 18.9},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_babel_locale_data --warmup 2400 --calls "
        "3000: a plain loop in the release's venv, 2400 warm-up calls (past the fill), "
        "then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() before, at "
        "the half and after, PYTHONMALLOC=malloc, tcache off; median time per call (a "
        "2-core machine under load). The fill: truth.py control_babel_locale_data "
        "--warmup 200 --calls 3000 gave 9235.74 B/call (2198.98 B/call in the second "
        "half); its shape from heap samples every 25 calls of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import babel.localedata
    import babel.numbers
    ids = sorted(babel.localedata.locale_identifiers())[:int(params.get("locales", 160))]
    return {"fmt": babel.numbers.format_decimal, "ids": ids, "n": 0}


def step(state):
    i = state["n"]
    state["n"] += 1
    ids = state["ids"]
    state["fmt"](1234.5, locale=ids[(i // 12) % len(ids)])
