"""Control, saw-tooth: ua-parser's parse cache (`_PARSE_CACHE` in user_agent_parser.py,
MAX_CACHE_SIZE = 200), which is emptied wholesale when full: the 201st new user agent
clears all 200 entries before it is stored. The scenario parses a new user-agent string
every call (an Edge build number that changes, as a log of many clients has), so the
heap climbs ~1.25 KiB/call for 200 calls (each entry: the string and the parsed
user_agent, os and device dicts), drops back to nothing, and climbs again: a saw-tooth of
period 200 in a ~225 KiB band from the first call on, with no fill phase and no growth
(its tops creep ~0.4 B/call over the first 6000 calls). Parsing walks ua-parser's
regexes: ~1.2 ms a call.

Truth "no leak": bounded (+0.27 B/call over 2400 calls after a 1000-call warm-up, 0.01
B/call in their second half: whole periods, measured at the tops). With a 200-call
warm-up: the same, 0.27 B/call (0.07 in the second half).
"""

CASE = {
    "title": "control: ua-parser parse cache cleared wholesale every 200 entries",
    "kind": "control",
    "link": "https://github.com/ua-parser/uap-python",
    "package": "ua-parser",
    "versions": {"good": "0.18.0"},
    "extra": [],
    "params": {},
    "truth": {
        "0.18.0": {"b_per_call": 0.27, "b_per_call_2nd_half": 0.01, "us_per_call": 1420.04},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_ua_parser_cache_sawtooth --warmup 1000 "
        "--calls 2400: a plain loop in the release's venv, 1000 warm-up calls, then 2400 "
        "calls (12 whole periods); glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). With truth.py's default 200-call "
        "warm-up (--calls 2400): 0.27 B/call (0.07 B/call in the second half); the "
        "shape from heap samples every 20 calls of the same loop, the creep from "
        "samples every 400 calls over 6000"
    ),
    "batch": "49b",
}


def setup(params):
    from ua_parser import user_agent_parser
    return {"parse": user_agent_parser.Parse, "n": 0}


def step(state):
    n = state["n"]
    state["n"] += 1
    ua = (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          f"Chrome/120.0.{n}.{n % 97} Safari/537.36 Edg/120.0.{n}.0")
    return state["parse"](ua)["user_agent"]["family"]
