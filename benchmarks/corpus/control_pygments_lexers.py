"""Control: pygments' lexer registry: get_lexer_by_name imports a lexer's module on first
use (pygments.lexers._lexer_cache) and the first instance of a RegexLexer class compiles
its token table for good (the class's _tokens). Each call tokenizes a line; every 10th
call moves to the next of the first 150 lexer aliases (sorted), so the heap rises by one
lexer's module and regexes (tens of KiB) every 10 calls, ~10 KiB/call on average, for
1500 calls, then stays flat. Truth "no leak": heap flat once the 150 lexers are loaded
(+0.5 B/call after a 2000-call warm-up). With a 200-call warm-up: ~8 MiB more by call
~1500 (~6.6 KiB/call, in steps), then flat.
"""

CASE = {
    "title": "control: pygments lexers loaded on first use (150 lexers)",
    "kind": "control",
    "link": "https://pygments.org/docs/api/#pygments.lexers.get_lexer_by_name",
    "package": "pygments",
    "versions": {"good": "2.18.0"},
    "extra": [],
    "params": {},
    "truth": {
        "2.18.0": {"b_per_call": 0.54, "b_per_call_2nd_half": 0.37, "us_per_call": 56.62},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_pygments_lexers --warmup 2000 --calls "
        "3000: a plain loop in the release's venv, 2000 warm-up calls (past the fill), "
        "then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() before, at "
        "the half and after, PYTHONMALLOC=malloc, tcache off; median time per call (a "
        "2-core machine under load). The fill: truth.py control_pygments_lexers "
        "--warmup 200 --calls 3000 gave 3465.18 B/call (0.62 B/call in the second "
        "half); its shape from heap samples every 25 calls of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    from pygments.lexers import get_all_lexers, get_lexer_by_name
    names = sorted(aliases[0] for _, aliases, _, _ in get_all_lexers() if aliases)
    return {"get": get_lexer_by_name, "names": names[:int(params.get("lexers", 150))],
            "n": 0}


def step(state):
    i = state["n"]
    state["n"] += 1
    names = state["names"]
    lexer = state["get"](names[(i // 10) % len(names)])
    for _ in lexer.get_tokens("x = 1  # note\n"):
        pass
