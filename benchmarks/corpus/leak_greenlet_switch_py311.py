"""greenlet 2.0.0 on CPython 3.11 leaks memory for every greenlet it starts and
switches to (PR 329: "Fix a memory leak switching to greenlets"): a greenlet spawned
and switched to once keeps a 4 KiB page of RSS after it finishes (SQLAlchemy's
asyncio layer does this per call). The 3.11 support came with greenlet 1.1.3/2.0 and
leaked from the start (1.1.3 grows too, per gevent issue 1924), so there is no good
release on 3.11; 2.0.1 fixes it.

The scenario is the report's loop without its `time.sleep(.001)` in the greenlet's
function (a pacing, not part of the leak).

The leaked memory looks like the interpreter's frame-stack chunks, which CPython 3.11
maps with mmap, outside malloc (inferred, not traced): the heap in use (mallinfo2)
does not move (0.1 B/call in both releases) and the leak shows in RSS only, one 4 KiB
page touched per greenlet. So
this case's `b_per_call` is truth.py's RSS growth per call (`rss_b_per_call`), not its
heap figure (kept as `heap_b_per_call`). A plain loop of 20,000 calls after 200 warm-up
agrees: RSS +4105.8 B/call in 2.0.0.post0, +9.8 in 2.0.1.

Truth: benchmarks/corpuskit/truth.py leak_greenlet_switch_py311 (3000 calls after 200
warm-up, RSS and heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "greenlet: every greenlet started on Python 3.11 keeps its stack (2.0.0)",
    "kind": "leak",
    "link": "https://github.com/python-greenlet/greenlet/issues/328",
    "package": "greenlet",
    "versions": {"bad": "2.0.0.post0", "fixed": "2.0.1"},
    "extra": [],
    "params": {},
    "truth": {
        "2.0.0.post0": {"b_per_call": 4096.0, "heap_b_per_call": 0.1, "us_per_call": 5.19},
        "2.0.1": {"b_per_call": 0.0, "heap_b_per_call": 0.1, "us_per_call": 11.56},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_greenlet_switch_py311: a plain loop in "
        "each release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) and RSS after gc.collect() before and after, "
        "PYTHONMALLOC=malloc, tcache off; b_per_call is the RSS growth (the leak is "
        "in mmap'd frame-stack chunks the heap figure does not see); median time "
        "per call"
    ),
}


def setup(params):
    import greenlet

    def greenlet_spawn(fn, *args, **kwargs):
        context = greenlet.greenlet(fn, greenlet.getcurrent())
        return context.switch(*args, **kwargs)

    def hi():
        return "hello"

    return {"spawn": greenlet_spawn, "fn": hi}


def step(state):
    state["spawn"](state["fn"])
