"""Control: Unidecode's per-block transliteration tables, loaded on first use. unidecode()
imports the table module of each 256-code-point block (`unidecode.x0NN`, a tuple of 256
strings) the first time a character of that block is seen and keeps it in its `Cache`
dict for good; there are ~190 tables, so the set is finite. The scenario transliterates
16 code points of a new 64-code-point window every call, walking the whole range
U+0000-U+1FFFF (surrogates skipped) once every 2048 calls, as a service slugifying names
in every script meets them. The heap rises by the table of every block met: ~1.5-4.7
KiB/call to call ~1000 (the BMP's scripts and CJK ideographs, 2.58 MiB), then in steps
of 2-30 KiB (the supplementary planes' few tables) to call ~2050 (2.66 MiB), then flat.

Truth "no leak": bounded (+0.13 B/call over 3000 calls after a 2200-call warm-up, 0.03
B/call in their second half). With a 200-call warm-up: 781 B/call averaged over 3000
calls, 22 B/call in their second half (the last steps).
"""

CASE = {
    "title": "control: Unidecode block tables loaded on first use (finite, ~190)",
    "kind": "control",
    "link": "https://github.com/avian2/unidecode/blob/master/unidecode/__init__.py",
    "package": "unidecode",
    "versions": {"good": "1.3.8"},
    "extra": [],
    "params": {},
    "truth": {
        "1.3.8": {"b_per_call": 0.13, "b_per_call_2nd_half": 0.03, "us_per_call": 19.75},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_unidecode_block_tables --warmup 2200 "
        "--calls 3000: a plain loop in the release's venv, 2200 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_unidecode_block_tables --warmup 200 --calls 3000 gave 781.19 B/call "
        "(22.46 B/call in the second half); its shape from heap samples every 200 calls "
        "of the same loop"
    ),
    "batch": "49b",
}


def setup(params):
    from unidecode import unidecode
    return {"unidecode": unidecode, "n": 0}


def step(state):
    start = (state["n"] * 64) % 0x20000
    if 0xD800 <= start < 0xE000:      # no surrogates: the next 2048 code points instead
        start += 0x800
    state["n"] += 1
    return state["unidecode"]("".join(chr(c) for c in range(start, start + 64, 4)))
