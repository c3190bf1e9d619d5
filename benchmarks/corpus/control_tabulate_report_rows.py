"""Control, saw-tooth step time: tabulate formatting a fixed list of benchmark-report
tables in order, each with more rows than the one before. `tabulate(rows, headers,
tablefmt="github", floatfmt=".2f")` is pure Python: it guesses each column's type by
trying every value, formats every cell, measures widths, pads and joins; so a call
costs in proportion to its rows. Table i of the 1500 has 1 + i // 20 rows (1 to 75) of
five numeric columns (int, int, float, float, int): ~0.2 ms for the smallest, ~2 ms for
the largest on a loaded 2-core machine; after the 1500th the list starts again at one
row, so the step time rises through the list and drops back (a ~1.9 s cycle).

The cells are numbers on purpose: every str cell goes through `_strip_ansi`
(`re.sub(r"\\4", s)`), and with two str columns the glibc heap settled ~37 KiB higher
over the first ~8 cycles (CPython 3.11; flat from the first cycle with `_strip_ansi`
made a no-op) before going flat: a bounded fill, but not this case's class. The tables
are built once in setup; tabulate keeps nothing between calls. Truth "no leak, no
slowdown": +0.11 B/call over 3000 calls after a 1500-call warm-up (0.03 in their
second half); the step time is the same cycle after cycle.
"""

CASE = {
    "title": "control: tabulate over 1500 numeric report tables of 1 to 75 rows, in order",
    "kind": "control",
    "link": "https://github.com/astanin/python-tabulate",
    "package": "tabulate",
    "versions": {"good": "0.9.0"},
    "extra": [],
    "params": {},
    "truth": {
        "0.9.0": {"b_per_call": 0.11, "b_per_call_2nd_half": 0.03, "us_per_call": 1236.83},
    },
    "measured": (
        'benchmarks/corpuskit/truth.py control_tabulate_report_rows --calls 3000 '
        "--warmup 1500: a plain loop in the release's venv; glibc heap in use "
        '(mallinfo2) after gc.collect() before, at the half and after, '
        'PYTHONMALLOC=malloc, tcache off; median time per call, and over the first and '
        'the last tenth of the calls (a loaded 2-core machine). 1500 warm-up calls (1 '
        'cycle of 1500), then 3000 calls (2 cycles): 0.11 B/call, 0.03 in the second '
        'half; 1236.83 us/call median, 308.63 first tenth, 1995.17 last tenth. The rise '
        'inside one cycle: benchmarks/corpuskit/truth.py control_tabulate_report_rows '
        '--calls 1200 --warmup 1500 (0.8 of a cycle, from its start): 176.55 us/call '
        'over the first tenth, 1649.38 over the last (9.3x), 920.11 median; 0.33 '
        'B/call, 0.08 in the second half'
    ),
    "batch": "49d",
}


def setup(params):
    from tabulate import tabulate
    n = int(params.get("tables", 1500))
    tables = [[[r, 1000 * i + r, (i * 7 + r) * 0.25, (i * 7 + r) * 0.625, (i + r) % 5]
               for r in range(1 + i // 20)] for i in range(n)]
    return {"tabulate": tabulate, "tables": tables, "n": 0,
            "headers": ["#", "run", "p50_ms", "p99_ms", "errors"]}


def step(state):
    tables, n = state["tables"], state["n"]
    state["n"] += 1
    return state["tabulate"](tables[n % len(tables)], headers=state["headers"],
                             tablefmt="github", floatfmt=".2f")
