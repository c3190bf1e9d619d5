"""Control: pytz loads a zone's tzfile on first use and keeps the parsed timezone for good
(pytz._tzinfo_cache, one entry per zone name): a finite set of ~600 zones. Each second
call asks for the next name of pytz.all_timezones (the call between localizes a datetime
in the same zone, a cache hit), so the heap rises at ~4.5 KiB/call for ~1200 calls (1000
past harness's 200-call warm-up) and then, every zone loaded, stays flat. Truth "no
leak": heap flat (+1.5 B/call over 3000 calls after an 8000-call warm-up). With a
200-call warm-up: ~3.9 MiB more by call ~1190 (~3.9 KiB/call), then a small tail (a few
hundred B/call, then tens) that dies out by ~6000: 1.3 KiB/call averaged over 3000
calls, 17 B/call in their second half.
"""

CASE = {
    "title": "control: pytz timezone cache over every zone name",
    "kind": "control",
    "link": "https://github.com/stub42/pytz/blob/master/src/pytz/__init__.py",
    "package": "pytz",
    "versions": {"good": "2024.2"},
    "extra": [],
    "params": {},
    "truth": {
        "2024.2": {"b_per_call": 1.51, "b_per_call_2nd_half": -1.08, "us_per_call": 27.86},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_pytz_zones --warmup 8000 --calls 3000: a "
        "plain loop in the release's venv, 8000 warm-up calls (past the fill), then "
        "3000 calls; glibc heap in use (mallinfo2) after gc.collect() before, at the "
        "half and after, PYTHONMALLOC=malloc, tcache off; median time per call (a "
        "2-core machine under load). The fill: truth.py control_pytz_zones --warmup 200 "
        "--calls 3000 gave 1327.13 B/call (17.37 B/call in the second half); its shape "
        "from heap samples every 25 calls of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import datetime

    import pytz
    return {"pytz": pytz, "names": list(pytz.all_timezones), "n": 0,
            "when": datetime.datetime(2024, 3, 31, 12, 30)}


def step(state):
    i = state["n"]
    state["n"] += 1
    names = state["names"]
    tz = state["pytz"].timezone(names[(i // 2) % len(names)])
    tz.localize(state["when"]).utcoffset()
