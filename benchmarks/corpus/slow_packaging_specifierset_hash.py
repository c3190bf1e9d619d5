"""packaging 24.2: parsing requirement lines ~1.4x slower than in 24.1.

packaging 24.2 rewrote ``utils.canonicalize_version`` as a ``functools.singledispatch``
that turns a ``Version`` back into a string and parses it again
(``str(_TrimmedRelease(str(version)))``); 24.1 built the canonical string from the
parsed parts. ``Specifier.__hash__`` goes through ``_canonical_spec``, which calls
``canonicalize_version`` on the specifier's version, and ``SpecifierSet`` keeps its
specifiers in a frozenset, so every ``SpecifierSet`` built (every ``Requirement``
parsed) hashes each of its specifiers and pays one more version parse apiece:
``canonicalize_version(Version("1.7.3.post1"))`` 2.0 us in 24.1, 9.6 us in 24.2;
``SpecifierSet(">=1.24.0,<2.1.0")`` 16 us, 31 us. The fix (pypa/packaging PR 994,
"avoid duplicate Version creation in canonicalize_version": SpecifierSet creation 37 %
faster) is in 26.0.

The step parses the eight requirement lines of a small requirements file with
``packaging.requirements.Requirement`` (13 specifiers in all), as a tool reading a
project's dependencies does: a cheap, pure step (~0.3 ms), most of whose time is not
the changed function, so the slowdown is a modest 1.3-1.5x. load_verdicts sweeps it as
``harness sweep --between`` over two requirement lock files with hashes that differ in
that one pin (``locks/`` beside this file: ``uv pip compile --generate-hashes
--no-header --no-annotate --python-version 3.11`` of ``packaging==24.1`` and of
``packaging==24.2``; packaging has no dependencies).

Truth, by hand, outside harness: two venvs built from the two lock files (``uv venv
--python python3.11``, ``uv pip install --require-hashes -r LOCK``); in each, this
file's ``setup({})`` then ``step`` once, then ``timeit.Timer(step,
timer=time.process_time)`` over 7 blocks of 300 calls, the median block's us/call (CPU
time: the 2-core machine had a load average of 9-15 from other work); one subprocess
per version and round, 24.1 and 24.2 alternated, 8 rounds, the order flipped every
other round; the loop is written out in "measured".
"""

CASE = {
    "title": "packaging: Requirement()/SpecifierSet() ~1.4x slower in 24.2",
    "kind": "slowdown",
    "link": "https://github.com/pypa/packaging/pull/994",
    "package": "packaging",
    "versions": {"good": "24.1", "bad": "24.2"},
    "extra": [],
    "params": {},
    "truth": {
        "24.1": {"us_per_call": 288.1},
        "24.2": {"us_per_call": 389.0},
    },
    "measured": (
        "Per round and version, in VENV (uv venv --python python3.11; uv pip install "
        "--require-hashes -r locks/packaging-V.txt): VENV/bin/python -c 'load this file; "
        "st = setup({}); step(st); t = timeit.Timer(lambda: step(st), "
        "timer=time.process_time); median of [t.timeit(300) / 300 for _ in range(7)]'; "
        "8 rounds, 24.1 then 24.2, the order flipped every other round (load average "
        "14-16 on 2 cores). CPU us/call, 24.1: 289.0/287.2/290.4/290.8/286.8/275.0/"
        "278.3/296.2; 24.2: 388.9/392.8/374.0/393.3/389.0/394.8/386.0/381.7. Medians "
        "288.1 and 389.0: bad/good 1.35x; per-round ratios 1.29-1.44 (median 1.35, sd "
        "0.05). Wall clock (time.perf_counter), 4 more rounds on a quieter host (load "
        "0.6-4): 24.1 271.7/285.0/270.0/272.3, 24.2 363.0/363.9/367.2/360.8: 1.34x."
    ),
}

LINES = (
    "requests>=2.31,<3",
    "urllib3>=1.26.0,<3,!=2.0.0",
    "numpy>=1.24,<2.1",
    "pydantic~=2.5",
    "attrs>=23.1",
    "click>=8.0,<9",
    "idna>=2.5,<4",
    "certifi>=2023.7.22",
)


def setup(params):
    from packaging.requirements import Requirement

    lines = list(params.get("lines") or LINES)
    return {"parse": Requirement, "lines": lines}


def step(state):
    parse = state["parse"]
    for line in state["lines"]:
        parse(line)
