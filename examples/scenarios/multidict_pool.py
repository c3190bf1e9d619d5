"""A real leak in worker processes: multidict_pop.py's step (a MultiDict of 100 fresh
keys, every one popped) run as the tasks of a forked pool of two workers, as a data
loader's workers would run it. multidict's C extension, releases 6.5.x-6.6.3, keeps the
storage of popped entries (aio-libs/multidict#1232, fixed in 6.6.4): each task leaves
about 6 KB in its worker, the stepping process keeps nothing.

Truth by hand (a plain loop outside harness, the same pool, 4,000 calls of 2 tasks):
6.5.1's workers' USS +11,986 B a call and tracemalloc in a worker +5,976 B a task; 6.4.4
+32 B and 0 B.
Params: keys (default 100).
"""
import multiprocessing

KEYS = []


def task(_):
    from multidict import MultiDict
    md = MultiDict(dict((k, "v") for k in KEYS))
    for k in KEYS:
        md.pop(k)
    return len(md)


def setup(params):
    from multidict import __version__
    KEYS[:] = ["X-Any-%d" % i for i in range(int(params.get("keys", 100)))]
    return {"pool": multiprocessing.get_context("fork").Pool(2), "version": __version__}


def step(state):
    state["pool"].map(task, range(2))


def teardown(state):
    state["pool"].terminate()


def info(state):
    return {"multidict": state["version"]}
