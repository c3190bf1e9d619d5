"""Control, slow creep: emoji's shortcode lookup cache. `emojize()` looks each
`:shortcode:` of the text up with `get_emoji_by_name(name, language)` (in
emoji/unicode_codes/__init__.py), an `functools.lru_cache(maxsize=4000)` over a linear
scan of EMOJI_DATA (5042 emoji). The scenario emojizes a chat message with one
shortcode every call, `language="alias"` (the GitHub/Slack-style names), cycling in
order through every English name and alias the release knows (5,153 codes, more than
the cache holds): each call adds one small entry (the link, the (name, language) key
tuple and the name string built by emojize): ~250 B/call for 4,000 calls (~0.97 MiB),
then the least recently used entry is dropped for each new one; one more step of
~145 KiB near call 5,300 (the dict, churned by the evictions, is rebuilt once at its
next size), then flat. The cycle being longer than the cache, every call past the fill
misses and scans EMOJI_DATA (twice for a name that is not an alias): ~0.3-1.5 ms a call.

Truth "no leak": bounded (+0.92 B/call over 6000 calls after a 6000-call warm-up, 0.06
B/call in their second half; +1.83 B/call, 4.66 in the second half, over 3000 calls
after the same warm-up: names of varying length come and go). With a 200-call
warm-up: 187 B/call averaged over 6000 calls, 111 B/call in their second half (the
end of the fill and the dict's step).
"""

CASE = {
    "title": "control: emoji get_emoji_by_name LRU cache (4000 shortcodes, ~250 B each)",
    "kind": "control",
    "link": "https://github.com/carpedm20/emoji/blob/master/emoji/unicode_codes/__init__.py",
    "package": "emoji",
    "versions": {"good": "2.14.1"},
    "extra": [],
    "params": {},
    "truth": {
        "2.14.1": {"b_per_call": 0.92, "b_per_call_2nd_half": 0.06, "us_per_call": 659.12},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_emoji_shortcode_lru --warmup 6000 "
        "--calls 6000: a plain loop in the release's venv, 6000 warm-up calls (past the "
        "fill and the dict's step), then 6000 calls; glibc heap in use (mallinfo2) after "
        "gc.collect() before, at the half and after, PYTHONMALLOC=malloc, tcache off; "
        "median time per call (a 2-core machine under load). --calls 3000 after the same "
        "warm-up gave 1.83 B/call (4.66 B/call in the second half). The fill: truth.py "
        "control_emoji_shortcode_lru --warmup 200 --calls 6000 gave 187.07 B/call "
        "(110.84 B/call in the second half); its shape from heap samples every 500 calls "
        "of the same loop"
    ),
    "batch": "49c",
}


def setup(params):
    import emoji
    from emoji.unicode_codes import EMOJI_DATA
    codes = sorted({d["en"] for d in EMOJI_DATA.values()}
                   | {a for d in EMOJI_DATA.values() for a in d.get("alias", ())})
    return {"emojize": emoji.emojize, "codes": codes, "n": 0}


def step(state):
    codes, n = state["codes"], state["n"]
    state["n"] += 1
    return state["emojize"](f"#{n} deploy finished {codes[n % len(codes)]} see thread",
                            language="alias")
