"""nh3 0.2.18 leaks a copy of its string argument on every call. The release moved
the extension from PyO3 0.21 to PyO3 0.22.0 (nh3's dependabot bump, PR 46) and ships
one abi3 wheel (cp37-abi3); on that build a `&str` argument is converted through a
temporary UTF-8 copy that is never released, so `clean()`, `clean_text()` and
`is_html()` all keep about the size of their input per call (the mechanism is
inferred from the measurements below, not traced: the growth follows the input's
length and is the same for all three functions). 0.2.17 (PyO3 0.21.2) does not
grow; 0.2.19, built with PyO3 0.23.2, does not either. Reported as nh3 issue 49,
bisected there to the PyO3 bumps.

The scenario cleans a 41-character HTML fragment; what leaks per call is one small
block, about 120 bytes (a 4.1 KB fragment keeps about 4 KB a call).

Truth: benchmarks/corpuskit/truth.py leak_nh3_clean_str_arg --calls 20000 (20000 calls
after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
It measured 122.2 B/call in 0.2.18 (the same in the second half, RSS +111 B/call),
0.0 in 0.2.17 and 0.2.19.
"""

CASE = {
    "title": "nh3: clean() keeps a copy of its argument per call (0.2.18, PyO3 0.22)",
    "kind": "leak",
    "link": "https://github.com/messense/nh3/issues/49",
    "package": "nh3",
    "versions": {"good": "0.2.17", "bad": "0.2.18", "fixed": "0.2.19"},
    "extra": [],
    "params": {"html": "<p>hi <b>there</b><script>x</script></p>"},
    "truth": {
        "0.2.17": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 5.7},
        "0.2.18": {"b_per_call": 122.2, "b_per_call_2nd_half": 122.2, "us_per_call": 5.55},
        "0.2.19": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 12.76},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_nh3_clean_str_arg --calls 20000: a plain "
        "loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49",
}


def setup(params):
    import nh3

    return {"clean": nh3.clean,
            "html": params.get("html", "<p>hi <b>there</b><script>x</script></p>")}


def step(state):
    return state["clean"](state["html"])
