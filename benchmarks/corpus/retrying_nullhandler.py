"""retrying: every Retrying() adds another NullHandler to the "retrying" logger.

From retrying 1.3.5 the Retrying constructor, when no logger is passed, attaches a fresh
``logging.NullHandler`` to the module's logger. A ``@retry``-decorated function builds a
new Retrying on every call, so the logger's handler list grows by one per call: each call
keeps ~264 B (the handler, its lock and its weakref in logging's handler list) and
``Logger.addHandler``'s membership scan makes every call slower than the one before
(linear in the calls so far). 1.4.1 attaches the handler once, to a module-level logger.

The step is the report's: call a decorated function that succeeds at once.

Truth, by hand, in each version's venv (CPython 3.11):
  per-call time: median of 5 blocks of 200 calls at the start, and of 5 blocks of 200
  after 31,000 calls (time.perf_counter);
  bytes per call: tracemalloc traced memory over 2,000 calls after gc.collect().
"""

CASE = {
    "title": "retrying: @retry adds a NullHandler per call (calls slow down and leak)",
    "kind": "slowdown",
    "link": "https://github.com/groodt/retrying/issues/20",
    "package": "retrying",
    "versions": {"good": "1.3.4", "bad": "1.3.5", "fixed": "1.4.1"},
    "extra": [],
    "params": {},
    "truth": {
        "1.3.4": {"us_per_call_first": 2.4, "us_per_call_last": 2.5, "b_per_call": 0},
        "1.3.5": {"us_per_call_first": 77.1, "us_per_call_last": 1985.9, "b_per_call": 264},
        "1.4.1": {"us_per_call_first": 4.1, "us_per_call_last": 2.8, "b_per_call": 0},
    },
    "measured": (
        "@retry(stop_max_attempt_number=3) def ok(): return 1; median us/call of 5 blocks "
        "of 200 calls at the start and again after 31,000 calls (time.perf_counter); "
        "tracemalloc traced bytes over 2,000 more calls after gc.collect(), divided by "
        "2,000. 1.3.5 is yanked on the index (it broke Python 2) but installs when pinned; "
        "1.3.7 and 1.4.0 show the same (1.4.0: 12.7 -> 1647 us/call, 264 B/call)."
    ),
}


def setup(params):
    import retrying

    @retrying.retry(stop_max_attempt_number=3)
    def succeed():
        return 1

    return {"fn": succeed}


def step(state):
    state["fn"]()
