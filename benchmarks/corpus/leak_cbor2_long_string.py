"""cbor2's C decoder, from 5.6.0 (a chunked decoder for text strings over 64 KiB) to
5.8.0, loses a reference to each partial string it concatenates (and, in 5.6.0, to
each 64 KiB chunk it reads) and never frees its scratch buffer for a UTF-8 character
split across chunks: every decode of a 128 KiB string keeps about 192 KiB in 5.6.0.
5.5.1 read such strings whole; 5.9.0 fixes the leaks (PR 290).

The scenario decodes PR 290's first test value, `"x" * 131072`. Its second one,
`("a" * 65535 + "€") * 2`, fails to decode in 5.6.0 (CBORDecodeEOF, a bug of its own)
and keeps 393 KB a call in 5.8.0 (truth.py, 2000 calls).

Truth: benchmarks/corpuskit/truth.py leak_cbor2_long_string (3000 calls after 200
warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "cbor2: the C decoder leaks chunks of text strings over 64 KiB",
    "kind": "leak",
    "link": "https://github.com/agronholm/cbor2/pull/290",
    "package": "cbor2",
    "versions": {"good": "5.5.1", "bad": "5.6.0", "fixed": "5.9.0"},
    "extra": [],
    "params": {},
    "truth": {
        "5.5.1": {"b_per_call": 0.6, "b_per_call_2nd_half": 0.2, "us_per_call": 15.34},
        "5.6.0": {"b_per_call": 196768.7, "b_per_call_2nd_half": 196768.1,
                  "us_per_call": 163.91},
        "5.9.0": {"b_per_call": 0.7, "b_per_call_2nd_half": 0.1, "us_per_call": 16.38},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_cbor2_long_string: a plain loop in each "
        "release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import cbor2
    return {"loads": cbor2.loads, "buf": cbor2.dumps("x" * 131072)}


def step(state):
    state["loads"](state["buf"])
