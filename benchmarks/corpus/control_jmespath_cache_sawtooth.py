"""Control, saw-tooth: jmespath's parsed-expression cache (`Parser._CACHE`, _MAX_SIZE =
128 in 1.0.1): when a new expression makes it 129 entries, `_free_cache_entries` drops
64 of them chosen at random. The scenario searches a document with a new expression
every call (a filter on a request's id, as an API gateway templating queries does);
each parsed AST is ~11.4 KiB, so the heap climbs to ~1.46 MiB by call 128, then
saw-tooths between ~1.0 and ~1.5 MiB with a period of 64 calls, from inside harness's
200-call warm-up on. The tops creep ~50 KiB more by call ~640 (the dict's table and
allocator slack), then hold at ~1.51 MiB (samples every 640 calls to 12,800: 1504-1516
KiB).

Truth "no leak": bounded (+3.95 B/call over 3072 calls after a 1280-call warm-up, 0.82
B/call in their second half: whole periods, measured at the tops). With a 200-call
warm-up: 42 B/call averaged over 3072 calls (the creep; the ends at different phases),
2.8 B/call in their second half.
"""

CASE = {
    "title": "control: jmespath expression cache (128, halves at random when full)",
    "kind": "control",
    "link": "https://github.com/jmespath/jmespath.py",
    "package": "jmespath",
    "versions": {"good": "1.0.1"},
    "extra": [],
    "params": {},
    "truth": {
        "1.0.1": {"b_per_call": 3.95, "b_per_call_2nd_half": 0.82, "us_per_call": 132.7},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_jmespath_cache_sawtooth --warmup 1280 "
        "--calls 3072: a plain loop in the release's venv, 1280 warm-up calls (past the "
        "creep), then 3072 calls (48 whole periods); glibc heap in use (mallinfo2) after "
        "gc.collect() before, at the half and after, PYTHONMALLOC=malloc, tcache off; "
        "median time per call (a 2-core machine under load). With a 200-call warm-up: "
        "truth.py control_jmespath_cache_sawtooth --warmup 200 --calls 3072 gave 42.46 "
        "B/call (2.84 B/call in the second half); the shape from heap samples every 16 "
        "calls of the same loop, the tops from samples every 640 calls"
    ),
    "batch": "49b",
}


def setup(params):
    import jmespath
    return {"search": jmespath.search, "n": 0,
            "doc": {"reservations": [{"state": "running", "id": "7", "instances": [
                {"instance_id": "i-1", "network": {"private_ip": "10.0.0.1"},
                 "tags": [{"key": "team7", "value": "core"}]}]}]}}


def step(state):
    n = state["n"]
    state["n"] += 1
    expr = (f"reservations[?state=='running' && id=='{n}'].instances[*]"
            f".{{id: instance_id, ip: network.private_ip, "
            f"team: tags[?key=='team{n}'].value | [0], n: `{n}`}}")
    return state["search"](expr, state["doc"])
