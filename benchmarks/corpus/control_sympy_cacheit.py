"""Control: sympy's cache (`sympy.core.cache.cacheit`: one functools.lru_cache per cached
function, SYMPY_CACHE_SIZE = 1000 entries each by default). Each call builds
`Integer(i)*x + y` for a new i, so Integer.__new__, Mul/Add flattening and the
assumptions helpers each cache one more entry until every one of those LRUs is full. The
heap rises at ~6.3 KiB/call for the first 500 calls, ~1.5 KiB/call up to call 1000 and a
little more up to ~1500, then stays flat (the LRUs evict one entry per new one). Truth
"no leak": heap flat once full (-0.8 B/call after a 2000-call warm-up). With a 200-call
warm-up: ~1.4 MiB more, 95% of it by call ~1025 (1.7 KiB/call), nothing after ~1500.
"""

CASE = {
    "title": "control: sympy cacheit LRUs (SYMPY_CACHE_SIZE=1000) filling",
    "kind": "control",
    "link": "https://github.com/sympy/sympy/blob/master/sympy/core/cache.py",
    "package": "sympy",
    "versions": {"good": "1.13.3"},
    "extra": ["mpmath==1.3.0"],
    "params": {},
    "truth": {
        "1.13.3": {"b_per_call": -0.75, "b_per_call_2nd_half": -0.93, "us_per_call": 207.56},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_sympy_cacheit --warmup 2000 --calls "
        "3000: a plain loop in the release's venv, 2000 warm-up calls (past the fill), "
        "then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() before, at "
        "the half and after, PYTHONMALLOC=malloc, tcache off; median time per call (a "
        "2-core machine under load). The fill: truth.py control_sympy_cacheit --warmup "
        "200 --calls 3000 gave 481.07 B/call (0.61 B/call in the second half); its "
        "shape from heap samples every 25 calls of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import sympy
    x, y = sympy.symbols("x y")
    return {"sympy": sympy, "x": x, "y": y, "n": 0}


def step(state):
    i = state["n"]
    state["n"] += 1
    sympy, x, y = state["sympy"], state["x"], state["y"]
    return (sympy.Integer(i) * x + y).free_symbols
