"""freezegun: freeze_time(ignore=LIST) appends its default ignores to the caller's list.

From the release that added the ``ignore`` argument (0.1.19, PR 50) until 0.3.10,
``freezegun.api.freeze_time`` did ``if ignore is None: ignore = []`` and then
``ignore.append('six.moves.')`` etc. on the list it was given. A caller that keeps one
ignore list and passes it on every ``freeze_time`` (a test suite's ``IGNORE = [...]``)
gets that list two entries longer per call (five by 0.3.10), for good. ``start()`` and
``stop()`` test every module in ``sys.modules`` against the whole list
(``mod_name.startswith(tuple(self.ignore))``), so each freeze/unfreeze is slower than
the one before (linear in the calls so far). Fixed in 0.3.11 by PR 260
(its commit "made the ignore paramater not mutate its input": ``ignore = ignore[:]``).
0.3.11 itself no longer imports on CPython 3.11 (it reads ``time.clock``); 0.3.12 is
the first fixed release that does.

The step: ``with freeze_time("2020-01-01", ignore=IGNORE): pass`` with one list made
in setup.

Truth, by hand, in each release's venv (CPython 3.11): benchmarks/corpuskit/truth.py,
per-call time of the first and the last tenth of the calls after 200 warm-up calls, and
heap bytes per call (mallinfo2 after gc.collect()).
"""

CASE = {
    "title": "freezegun: freeze_time(ignore=list) grows the caller's list (calls slow down)",
    "kind": "slowdown",
    "link": "https://github.com/spulec/freezegun/pull/260",
    "package": "freezegun",
    "versions": {"good": None, "bad": "0.1.19", "fixed": "0.3.12"},
    "extra": ["python-dateutil==2.9.0.post0", "six==1.16.0"],
    "params": {},
    "truth": {
        "0.1.19": {"us_per_call_first": 1455, "us_per_call_last": 5357, "b_per_call": 17},
        "0.3.12": {"us_per_call_first": 2226, "us_per_call_last": 2194, "b_per_call": 0},
    },
    "measured": (
        "PYTHONPATH=. .venv/bin/python benchmarks/corpuskit/truth.py "
        "slow_freezegun_ignore_list_mutation --calls 2000 --warmup 200 --jobs 1: 0.1.19 "
        "1455 -> 5357 us/call (3.7x), 17 B/call (two list slots per call); 0.3.12 2226 "
        "-> 2194 us/call, 0 B/call. With --calls 1000 (noisier, a loaded 2-core host): "
        "0.1.19 1401 -> 4485, 1379 -> 3170, 1459 -> 3295; 0.3.12 2819 -> 3108, 2688 -> "
        "2308, 2834 -> 2505. 0.3.10 (last bad) 8473 -> 22873 us/call, 45 B/call. No good "
        "release: the ignore argument and its mutation arrived together."
    ),
    "batch": "49d",
}


def setup(params):
    from freezegun import freeze_time

    return {"freeze_time": freeze_time, "ignore": ["selenium"]}


def step(state):
    with state["freeze_time"]("2020-01-01", ignore=state["ignore"]):
        pass
