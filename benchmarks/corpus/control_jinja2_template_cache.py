"""Control: jinja2's Environment template cache (an LRUCache of compiled templates,
cache_size=400) fed a new template name every third call through a FunctionLoader (each
name's source differs, so each is lexed, parsed, compiled to Python code and kept); the
two calls after it render the same template again from the cache. The cache holds 400
compiled templates (~3.7 KiB each): it fills for 1200 calls at ~1.6 KiB/call, 1000 of
them past harness's 200-call warm-up, then evicts the oldest template for each new one,
one at a time: flat. Truth "no leak": heap flat once full (+1.7 B/call over 3000 calls
after a 5000-call warm-up). With a 200-call warm-up: ~1.6 KiB/call until call ~1200 (the
400 templates), then a slow tail (~100-300 B/call, uneven) that dies out by call ~5000:
630 B/call averaged over 3000 calls, 170 B/call in their second half; ~1.9 MiB in all.
"""

CASE = {
    "title": "control: jinja2 Environment template cache filling to cache_size=400",
    "kind": "control",
    "link": "https://jinja.palletsprojects.com/en/3.1.x/api/#jinja2.Environment",
    "package": "jinja2",
    "versions": {"good": "3.1.4"},
    "extra": ["MarkupSafe==2.1.5"],
    "params": {},
    "truth": {
        "3.1.4": {"b_per_call": 1.73, "b_per_call_2nd_half": 2.33, "us_per_call": 47.21},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_jinja2_template_cache --warmup 5000 "
        "--calls 3000: a plain loop in the release's venv, 5000 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_jinja2_template_cache --warmup 200 --calls 3000 gave 629.64 B/call "
        "(171.8 B/call in the second half); its shape from heap samples every 25 calls "
        "of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import jinja2

    def load(name):
        # a new source per name; uptodate() true: the cache entry is reused
        return f"<li class='{name}'>{{{{ user.name|e }}}} ({name})</li>", None, lambda: True

    env = jinja2.Environment(loader=jinja2.FunctionLoader(load),
                             cache_size=int(params.get("cache_size", 400)))
    return {"env": env, "n": 0, "user": {"name": "ada"}}


def step(state):
    k = state["n"] // 3         # a new template every third call
    state["n"] += 1
    state["env"].get_template(f"t{k}").render(user=state["user"])
