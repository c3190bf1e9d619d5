"""Control: soupsieve's compiled-selector cache (`_cached_css_compile`, an
`functools.lru_cache(maxsize=500)` in css_parser.py) fed a new selector every call, as a
scraper building per-page selectors from its configuration does. Each compiled
SelectorList is ~4.6 KiB; the cache fills for 500 calls (300 past harness's 200-call
warm-up), then evicts the least recently used selector for each new one: flat.
soupsieve imports bs4 at import time, so beautifulsoup4 is pinned beside it.

Truth "no leak": heap flat once the 500 entries are in (-1.7 B/call over 3000 calls
after a 1000-call warm-up, 0.6 B/call in their second half). With a 200-call warm-up:
~4.6 KiB/call to call 500 (2.29 MiB), ~40 KiB more by call 700 (2.33 MiB), then flat:
480 B/call averaged over 3000 calls, -3 B/call in their second half.
"""

CASE = {
    "title": "control: soupsieve compiled-selector LRU cache (500 entries)",
    "kind": "control",
    "link": "https://github.com/facelessuser/soupsieve/blob/main/soupsieve/css_parser.py",
    "package": "soupsieve",
    "versions": {"good": "2.6"},
    "extra": ["beautifulsoup4==4.12.3"],
    "params": {},
    "truth": {
        "2.6": {"b_per_call": -1.7, "b_per_call_2nd_half": 0.6, "us_per_call": 310.66},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_soupsieve_compile_lru --warmup 1000 "
        "--calls 3000: a plain loop in the release's venv, 1000 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_soupsieve_compile_lru --warmup 200 --calls 3000 gave 479.74 B/call "
        "(-3.05 B/call in the second half); its shape from heap samples every 100 calls "
        "of the same loop"
    ),
    "batch": "49b",
}


def setup(params):
    import soupsieve
    return {"compile": soupsieve.compile, "n": 0}


def step(state):
    n = state["n"]
    state["n"] += 1
    state["compile"](f"div.item-{n} > a[href^='/p/{n}'], "
                     f"li:nth-child({n % 7 + 1}) span#s{n}:not(.hidden)")
