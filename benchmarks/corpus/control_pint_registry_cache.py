"""Control: pint's UnitRegistry caches what it works out about a unit expression
(registry._cache: parsed units, root units, dimensionality, in dicts keyed by the units
container). Each call makes a Quantity of a compound unit `a ** p / b` drawn in turn
from a finite set (12 x 12 x 10 = 1440 combinations), converts it to base units and asks
its dimensionality. The heap rises at ~2.7 KiB/call for the first 1440 calls, then ~0.36
KiB/call to ~2900 (entries made on the second pass), then stays flat. Truth "no leak":
heap flat once every combination is cached (-1.8 B/call after a 3500-call warm-up). With
a 200-call warm-up: ~2.7 KiB/call to call ~1440, ~0.36 KiB/call to ~2900 (~3.8 MiB in
all): 1.3 KiB/call averaged over 3000 calls, 283 B/call in their second half.
"""

CASE = {
    "title": "control: pint UnitRegistry caches over 1440 compound units",
    "kind": "control",
    "link": "https://pint.readthedocs.io/en/stable/advanced/performance.html",
    "package": "pint",
    "versions": {"good": "0.24.4"},
    "extra": ["flexcache==0.3", "flexparser==0.4", "platformdirs==4.3.6",
              "typing_extensions==4.12.2"],
    "params": {},
    "truth": {
        "0.24.4": {"b_per_call": -1.83, "b_per_call_2nd_half": 0.09, "us_per_call": 178.24},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_pint_registry_cache --warmup 3500 "
        "--calls 3000: a plain loop in the release's venv, 3500 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_pint_registry_cache --warmup 200 --calls 3000 gave 1324.19 B/call "
        "(283.27 B/call in the second half); its shape from heap samples every 25 calls "
        "of the same loop"
    ),
    "batch": "49",
}

UNITS = ["meter", "second", "kilogram", "ampere", "kelvin", "mole", "candela", "liter",
         "newton", "joule", "watt", "volt"]


def setup(params):
    import pint
    return {"ureg": pint.UnitRegistry(cache_folder=None), "n": 0}


def step(state):
    i = state["n"]
    state["n"] += 1
    a, b, p = UNITS[i % 12], UNITS[(i // 12) % 12], 1 + (i // 144) % 10
    q = state["ureg"].Quantity(2.0, f"{a} ** {p} / {b}")
    q.to_base_units()
    return q.dimensionality
