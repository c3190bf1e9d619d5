"""Control: phonenumbers loads a region's metadata on first use (the generated
phonenumbers.data.region_XX module is imported and its PhoneMetadata registered in
PhoneMetadata._region_metadata for good) over a finite key set: the ~245 supported
regions. Each call parses and formats a number of the current region; every 4th call
moves to the next region (sorted), so the heap rises by one region's metadata (and the
patterns it compiles) every 4 calls for ~980 calls, then stays flat. Truth "no leak":
bounded (+13 B/call over 3000 calls after a 2000-call warm-up, -10 B/call in their
second half; the stdlib re cache the patterns go through keeps turning over). With a
200-call warm-up: ~1.5 MiB more by call ~1000 (~1.9 KiB/call), then flat within ~0.1
MiB.
"""

CASE = {
    "title": "control: phonenumbers region metadata loaded on first use",
    "kind": "control",
    "link": "https://github.com/daviddrysdale/python-phonenumbers#memory-usage",
    "package": "phonenumbers",
    "versions": {"good": "8.13.50"},
    "extra": [],
    "params": {},
    "truth": {
        "8.13.50": {"b_per_call": 12.77, "b_per_call_2nd_half": -9.67, "us_per_call": 89.81},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_phonenumbers_region_metadata --warmup "
        "2000 --calls 3000: a plain loop in the release's venv, 2000 warm-up calls "
        "(past the fill), then 3000 calls; glibc heap in use (mallinfo2) after "
        "gc.collect() before, at the half and after, PYTHONMALLOC=malloc, tcache off; "
        "median time per call (a 2-core machine under load). The fill: truth.py "
        "control_phonenumbers_region_metadata --warmup 200 --calls 3000 gave 523.46 "
        "B/call (18.87 B/call in the second half); its shape from heap samples every 25 "
        "calls of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import phonenumbers
    regions = sorted(phonenumbers.SUPPORTED_REGIONS)
    return {"pn": phonenumbers, "regions": regions, "n": 0}


def step(state):
    i = state["n"]
    state["n"] += 1
    pn, regions = state["pn"], state["regions"]
    region = regions[(i // 4) % len(regions)]
    num = pn.example_number(region)
    if num is not None:
        text = pn.format_number(num, pn.PhoneNumberFormat.INTERNATIONAL)
        pn.is_valid_number(pn.parse(text, region))
