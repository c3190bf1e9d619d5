"""paddle-python-sdk: every Client() adds another NullHandler to the "null_logger" logger.

``paddle_billing.Client.__init__``, when no ``logger`` is passed, calls the static
``Client.null_logger()``, which takes the process-wide ``logging.getLogger("null_logger")``
and calls ``addHandler(NullHandler())`` on it unconditionally. The handler list of that
one logger therefore grows by one per Client ever built: each handler (with its RLock and
its weak reference in logging's ``_handlerList``) stays alive for good, and
``Logger.addHandler``'s ``if not (hdlr in self.handlers)`` scans the whole list, so each
``Client(...)`` is slower than the one before (linear in the Clients built so far). Issue
144 (reported on 1.10.0, with the ``for _ in range(10_000): Client("fake_key")`` loop
below); the code is in the first release, 0.1.0. Fixed in 1.14.1 (PR 145): the handler
is attached only when the logger has none.

The step is the report's: build a ``Client("fake_key")`` with the defaults (its own
requests Session; nothing is sent).

Truth, by hand, in each release's venv (CPython 3.11): benchmarks/corpuskit/truth.py,
per-call time of the first and the last tenth of the calls after 200 warm-up calls, and
heap bytes per call (mallinfo2 after gc.collect()).
"""

CASE = {
    "title": "paddle-python-sdk: Client() adds a NullHandler per instance (calls slow down)",
    "kind": "slowdown",
    "link": "https://github.com/PaddleHQ/paddle-python-sdk/issues/144",
    "package": "paddle-python-sdk",
    "versions": {"good": None, "bad": "0.1.0", "fixed": "1.14.1"},
    "extra": ["requests==2.32.3", "urllib3==2.2.3"],
    "params": {},
    "truth": {
        "0.1.0": {"us_per_call_first": 55.6, "us_per_call_last": 357.3, "b_per_call": 651},
        "1.14.1": {"us_per_call_first": 40.2, "us_per_call_last": 39.0, "b_per_call": 0},
    },
    "measured": (
        "PYTHONPATH=. .venv/bin/python benchmarks/corpuskit/truth.py "
        "slow_paddle_python_sdk_null_logger --calls 20000 --warmup 200: 0.1.0 55.6 -> "
        "357.3 us/call (6.4x), 651 B/call; 1.14.1 40.2 -> 39.0 us/call, 0 B/call. Other "
        "runs: 0.1.0 55.5 -> 354.6 and 55.9 -> 369.6; 1.14.0 (the last bad release) "
        "63.6 -> 368.5 us/call, 657 B/call. No good release: the unconditional "
        "addHandler is in the first release on the index."
    ),
    "batch": "49d",
}


def setup(params):
    from paddle_billing import Client

    return {"cls": Client}


def step(state):
    state["cls"]("fake_key")
