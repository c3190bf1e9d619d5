"""packaging 24.2: ``canonicalize_version`` of a parsed ``Version`` ~4-5x slower than
in 24.1.

packaging 24.2 rewrote ``utils.canonicalize_version`` as a ``functools.singledispatch``
whose ``Version`` branch turns the version back into a string and parses it again
(``str(_TrimmedRelease(str(version)))``); 24.1 built the canonical string from the
parsed parts. The fix (pypa/packaging PR 994, "avoid duplicate Version creation in
canonicalize_version") is in 26.0. slow_packaging_specifierset_hash.py beside this file
is the same change seen through ``SpecifierSet`` (most of whose time is not this
function: 1.35x); here the step is the changed function alone, a cheap one: a few
microseconds a call, so what it tests is whether a per-call time and a ratio of that
size are read right.

The step calls ``canonicalize_version(Version("1.7.3.post1"))`` once, the version
parsed in ``setup``, as ``Specifier.__hash__`` calls it.

Truth, by hand, outside harness: see "truth" and "measured" below.
"""

CASE = {
    "title": "packaging: canonicalize_version(Version) ~4-5x slower in 24.2",
    "kind": "slowdown",
    "link": "https://github.com/pypa/packaging/pull/994",
    "package": "packaging",
    "versions": {"good": "24.1", "bad": "24.2"},
    "extra": [],
    "params": {},
    "truth": {
        "24.1": {"us_per_call": 1.59},
        "24.2": {"us_per_call": 6.69},
    },
    "measured": (
        "Per round and version, in VENV (harness's local venv of packaging==V, "
        "python3.11, AMD EPYC, load average 0.3-0.5 on 2 cores), PYTHONMALLOC and "
        "GLIBC_TUNABLES unset: VENV/bin/python -c 'load this file; st = setup({}); "
        "step(st); t = timeit.Timer(lambda: step(st), timer=time.process_time); "
        "median of [t.timeit(30000) / 30000 for _ in range(7)]'; 8 rounds, 24.1 then "
        "24.2, the order flipped every other round. CPU us/call, 24.1: 1.607/1.605/"
        "1.599/1.597/1.583/1.540/1.576/1.579; 24.2: 6.700/6.758/6.821/6.638/6.709/"
        "6.517/6.636/6.671. Medians 1.59 and 6.69: bad/good 4.20x; per-round ratios "
        "4.16-4.27."
    ),
}


def setup(params):
    from packaging.utils import canonicalize_version
    from packaging.version import Version

    return {"canonicalize": canonicalize_version,
            "version": Version(params.get("version") or "1.7.3.post1")}


def step(state):
    state["canonicalize"](state["version"])
