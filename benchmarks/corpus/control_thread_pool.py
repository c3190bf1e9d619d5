"""Control: a thread pool that warms up: concurrent.futures.ThreadPoolExecutor starts a
worker thread (its stack mapped) per submit until max_workers, then reuses them; each
call maps one small task on it. Truth "no leak".
"""

CASE = {
    "title": "control: ThreadPoolExecutor spawning its workers lazily",
    "kind": "control",
    "link": "https://docs.python.org/3/library/concurrent.futures.html#threadpoolexecutor",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 63.45},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_thread_pool --warmup 1200: a plain "
        "loop in each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    from concurrent.futures import ThreadPoolExecutor
    return {"pool": ThreadPoolExecutor(max_workers=8), "n": 0}


def step(state):
    state["n"] += 1
    list(state["pool"].map(abs, range(-4, 4)))


def teardown(state):
    state["pool"].shutdown()
