"""Control: Textual's parsed-selector cache. `parse_selectors(css_selectors)` (in
textual/css/parse.py), which DOM queries (`query`, `query_one`, `match`) and the CSS
machinery go through, is an `functools.lru_cache(maxsize=1024)` of the parsed
selector sets (tuples of SelectorSet and Selector objects, ~5.9 KiB each here). The
scenario parses a new selector every call (a row id that changes, as an app querying
the widget of each new record does): the cache fills at ~5.9 KiB/call for 1,024 calls
(5.7 MiB), then drops the least recently used selector for each new one; ~0.15 MiB
more by call ~2,000 (the dict, churned by the evictions, rebuilt once at its next
size), then flat but for a slow wander of about +-15 KiB over thousands of calls (+6
B/call over one 1000-call stretch, -7 over another, none kept). Tokenizing and
parsing a selector: ~75 us a call.

Truth "no leak": bounded (-0.29 B/call over 12000 calls after a 3000-call warm-up,
-0.16 B/call in their second half; over shorter windows the wander shows: +3.47 B/call
over 3000 calls after a 3000-call warm-up, -2.17 over 6000 after 4000). With a
200-call warm-up: 1635 B/call averaged over 3000 calls (the fill ends at call 1,024),
1.87 B/call in their second half.
"""

CASE = {
    "title": "control: Textual parse_selectors LRU cache (1024 selectors, ~5.9 KiB each)",
    "kind": "control",
    "link": "https://github.com/Textualize/textual/blob/v1.0.0/src/textual/css/parse.py",
    "package": "textual",
    "versions": {"good": "1.0.0"},
    "extra": ["rich==13.9.4", "markdown-it-py==3.0.0", "mdurl==0.1.2",
              "mdit-py-plugins==0.4.2", "linkify-it-py==2.0.3", "uc-micro-py==1.0.3",
              "platformdirs==4.3.6", "pygments==2.18.0", "typing-extensions==4.12.2"],
    "params": {},
    "truth": {
        "1.0.0": {"b_per_call": -0.29, "b_per_call_2nd_half": -0.16, "us_per_call": 73.9},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_textual_selector_parse_lru --warmup 3000 "
        "--calls 12000: a plain loop in the release's venv, 3000 warm-up calls (past the "
        "fill), then 12000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). Shorter windows: --warmup 3000 --calls "
        "3000 gave 3.47 B/call (0.81 in the second half), --warmup 4000 --calls 6000 "
        "-2.17 B/call (-4.74). The fill: truth.py control_textual_selector_parse_lru "
        "--warmup 200 --calls 3000 gave 1635.32 B/call (1.87 B/call in the second "
        "half); its shape from heap samples every 1000 calls of the same loop"
    ),
    "batch": "49c",
}


def setup(params):
    from textual.css.parse import parse_selectors
    return {"parse": parse_selectors, "n": 0}


def step(state):
    n = state["n"]
    state["n"] += 1
    return state["parse"](f"ListView > #row-{n:06d} .cell-{n % 7}:hover, "
                          f"Screen #row-{n:06d} Label.title")
