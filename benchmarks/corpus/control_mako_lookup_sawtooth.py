"""Control, saw-tooth: mako's TemplateLookup keeps compiled templates in a mako.util
LRUCache(collection_size=300, threshold=0.5), which lets the collection grow to 450 and
then drops the 150 least recently used at once. A new template string is put (compiled
to a Python module) every fourth call and every call renders the newest one: the heap
rises for 1800 calls at ~1.5-2 KiB/call, then falls by ~150 templates every 600 calls
and climbs back: bounded saw-tooth. Truth "no leak": bounded (+5.7 B/call over 2400
calls, whole 600-call periods, after a 2400-call warm-up). With a 200-call warm-up:
~1.5-2 KiB/call up to call ~1800 (~1.9 MiB), then the saw-tooth (~0.75 MiB band): 606
B/call averaged over 3000 calls, -253 B/call in their second half.
"""

CASE = {
    "title": "control: mako TemplateLookup LRU (300 + 50%) evicting in bursts",
    "kind": "control",
    "link": "https://docs.makotemplates.org/en/latest/usage.html#using-templatelookup",
    "package": "mako",
    "versions": {"good": "1.3.6"},
    "extra": ["MarkupSafe==2.1.5"],
    "params": {},
    "truth": {
        "1.3.6": {"b_per_call": 5.69, "b_per_call_2nd_half": -7.13, "us_per_call": 27.71},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_mako_lookup_sawtooth --warmup 2400 "
        "--calls 2400: a plain loop in the release's venv, 2400 warm-up calls (past the "
        "fill), then 2400 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_mako_lookup_sawtooth --warmup 200 --calls 3000 gave 605.77 B/call "
        "(-253.3 B/call in the second half); its shape from heap samples every 25 calls "
        "of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    from mako.lookup import TemplateLookup
    return {"lookup": TemplateLookup(collection_size=int(params.get("size", 300))),
            "n": 0, "items": [1, 2, 3]}


def step(state):
    i = state["n"]
    state["n"] += 1
    lookup, uri = state["lookup"], f"/t{i // 4}"
    if i % 4 == 0:              # a new template every fourth call
        lookup.put_string(uri, f"<p>${{name}} #{i}</p>\n% for x in items:\n"
                               "<b>${x * 2}</b>\n% endfor\n")
    lookup.get_template(uri).render(name="ada", items=state["items"])
