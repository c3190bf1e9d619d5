"""Control, slow creep: openpyxl's column-letter memo. `get_column_letter` (in
openpyxl/utils/cell.py) is an `functools.lru_cache(maxsize=None)` memo, bounded all
the same: it raises ValueError outside 1..18278 (columns A to ZZZ, and an exception
is not cached), so it holds at most 18,278 entries. The scenario builds the formula of
a new column every call, cycling through every column of a sheet in order as a writer
of very wide reports does (`get_column_letter` of the column, then the absolute
references of its first 80 rows): each call adds one small entry (the column number,
a new int past 256, the letters, a new str past column Z, and a dict slot): ~115
B/call, with a step where the memo's dict grows (~150 KiB near call 5,500, ~300 KiB
near 10,900), ~145 B/call on average, for 18,278 calls (2.57 MiB), then nothing. A
steady small rise for a long time: the class a detector may take for a small leak.
Formatting the 80 references: ~0.25-0.45 ms a call.

Truth "no leak": heap flat once every column is in (+0.12 B/call over 3000 calls after
a 19000-call warm-up, 0.04 B/call in their second half). With a 200-call warm-up:
133 B/call averaged over 20000 calls (the fill ends at call 18,278), 122 B/call in
their second half.
"""

CASE = {
    "title": "control: openpyxl get_column_letter memo (18,278 columns, ~115-145 B each)",
    "kind": "control",
    "link": "https://openpyxl.readthedocs.io/en/3.1/api/openpyxl.utils.cell.html",
    "package": "openpyxl",
    "versions": {"good": "3.1.5"},
    "extra": ["et-xmlfile==2.0.0"],
    "params": {},
    "truth": {
        "3.1.5": {"b_per_call": 0.12, "b_per_call_2nd_half": 0.04, "us_per_call": 438.06},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_openpyxl_column_letters --warmup 19000 "
        "--calls 3000: a plain loop in the release's venv, 19000 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_openpyxl_column_letters --warmup 200 --calls 20000 gave 133.02 B/call "
        "(122.12 B/call in the second half); its shape from heap samples every 2000 "
        "calls of the same loop"
    ),
    "batch": "49c",
}


def setup(params):
    from openpyxl.utils.cell import absolute_coordinate, get_column_letter
    return {"letter": get_column_letter, "absolute": absolute_coordinate, "n": 0}


def step(state):
    col = state["n"] % 18278 + 1
    state["n"] += 1
    letter = state["letter"](col)
    absolute = state["absolute"]
    refs = [absolute(f"{letter}{row}") for row in range(1, 81)]
    return f"=SUM({refs[0]}:{refs[-1]})/COUNT({','.join(refs[::16])})"
