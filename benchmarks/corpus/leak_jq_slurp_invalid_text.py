"""Native-only leak: jq.py keeps the slurped inputs, in jq's own (malloc'd) memory,
whenever slurping text fails to parse. With `input_text(text, slurp=True)` the result
iterator builds one jq array (`jv_array()`, `jv_array_append()` per parsed value) and
hands it to the program; when a later value is invalid, `_parse_next_input()` raises
ValueError out of that loop and the array, with every value parsed so far, is never
`jv_free`d. jq's values live in libjq's heap (`jv_mem_alloc`, plain malloc), not
Python's: the process's RSS and USS grow, tracemalloc sees nothing. Fixed upstream by
commit 11432f7 ("Fix leak when slurping invalid text", 2026-07-10, the link), which is
in no release yet: jq 1.12.0, the newest, leaks too.

Slurping came with 1.5.0 (1.4.1, which has a CPython 3.11 wheel, has no `slurp`), so
there is no good release; the case is the bad release only, the first with slurp
(1.5.0).

The scenario slurps a short batch of JSON texts whose last one is truncated (an object,
an array, a string, then `!!`), as a reader of newline-delimited JSON meets a torn
line, and catches the ValueError: what leaks per call is the slurp array and its three
values, ~1 KiB of malloc'd memory.

Truth: benchmarks/corpuskit/truth.py leak_jq_slurp_invalid_text --calls 20000 (20000
calls after 200 warm-up; heap in use (mallinfo2, which counts libjq's malloc) and RSS
after gc.collect(), PYTHONMALLOC=malloc, tcache off).
It measured 1045.5 B/call in 1.5.0 (the same in the second half, RSS +1044.7 B/call).
The Python heap does not grow: tracemalloc's traced total over the same loop (200
warm-up, 20000 calls) +0.04 B/call; USS (psutil, default allocator, 20000 calls) +912
B/call. jq 1.12.0: heap +1274.5 B/call, RSS +1261.6, tracemalloc +0.04, USS +1123.
"""

CASE = {
    "title": "jq: input_text(slurp=True) keeps the parsed values in libjq's heap on a parse error",
    "kind": "leak",
    "link": "https://github.com/mwilliamson/jq.py/commit/11432f7a08fd0795df7617d1e01bf39a6706f24a",
    "package": "jq",
    "versions": {"good": None, "bad": "1.5.0", "fixed": None},
    "extra": [],
    "params": {},
    "truth": {
        "1.5.0": {"b_per_call": 1045.46, "b_per_call_2nd_half": 1045.5,
                  "rss_b_per_call": 1044.68, "tracemalloc_b_per_call": 0.04,
                  "uss_b_per_call": 911.97, "us_per_call": 6.85},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_jq_slurp_invalid_text --calls 20000: a plain "
        "loop in the release's venv, 200 warm-up calls, then 20000 calls; glibc heap in "
        "use (mallinfo2) and RSS after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call. tracemalloc: the same "
        "loop with tracemalloc's traced total before and after; USS: the same loop "
        "under the default allocator, psutil's memory_full_info().uss before and after"
    ),
    "batch": "49b",
}


def setup(params):
    import jq
    return {"prog": jq.compile(".")}


def step(state):
    try:  # noqa: SIM105  (a caller that moves on to the next batch)
        state["prog"].input_text('{"a": 1} [2] "three" !!', slurp=True).all()
    except ValueError:
        pass
