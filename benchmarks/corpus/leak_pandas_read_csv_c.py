"""pandas 2.2.0's C parser (read_csv, engine="c") keeps memory of its tokenizer after
each parse (fixed by PR 57084, "Fix mem leak in read_csv"). The report's loop, 1000
read_csv calls on a small file, grew to 3.2 GB of RSS; it showed only after the
program had used np.nan in a large array (the report's `pcp` lines, kept here). 2.1.4
is clean; 2.2.1 carries the fix.

The scenario parses a 300-row, five-column CSV from memory each call (the report's
file is not published). The growth scales with the rows: none at 100 rows (2000 calls),
129 KB a call at 300, 236 KB at 600, 939 KB at 2000 (2.2.0, RSS); 300 keeps a
22,663-call psleak run under 3 GB.

The growth shows in RSS, not in the heap in use: glibc's arena grows and mallinfo2
counts the growth as free chunks (2000 rows, 200 calls by hand: arena +1572925 B/call,
in use +532, free +1572393, RSS +482058). So this case's
`b_per_call` is truth.py's RSS growth per call; the heap-in-use figure (kept as
`heap_b_per_call`) grows about 90 B a call in every release, 2.1.4 and 2.2.1 included,
and 270 B more in 2.2.0. That shared growth (cause not looked into; 80 B/call over the
second half of the 3000 calls) is enough for psleak's defaults and pytest-memray to
call 2.1.4 and 2.2.1 leaking (benchmarks/corpus.py --case leak_pandas_read_csv_c): the
good and fixed releases are clean of the RSS leak, not flat on the heap.

Truth: benchmarks/corpuskit/truth.py leak_pandas_read_csv_c (3000 calls after 200
warm-up, RSS and heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "pandas: read_csv(engine='c') grows RSS on every parse (2.2.0)",
    "kind": "leak",
    "link": "https://github.com/pandas-dev/pandas/issues/57039",
    "package": "pandas",
    "versions": {"good": "2.1.4", "bad": "2.2.0", "fixed": "2.2.1"},
    "extra": ["numpy==1.26.4"],
    "params": {"rows": 300},
    "truth": {
        "2.1.4": {"b_per_call": 193.9, "heap_b_per_call": 92.4, "us_per_call": 791.36,
                  "late_calls": 150000, "late_heap_b_per_call": 55.14},
        "2.2.0": {"b_per_call": 127608.2, "heap_b_per_call": 364.6,
                  "us_per_call": 761.92},
        "2.2.1": {"b_per_call": 189.8, "heap_b_per_call": 97.0, "us_per_call": 668.24,
                  "late_calls": 150000, "late_heap_b_per_call": 55.28},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_pandas_read_csv_c: a plain loop in "
        "each release's venv, 200 warm-up calls, then 3000 calls; RSS and "
        "glibc heap in use (mallinfo2) after gc.collect() before and after, "
        "PYTHONMALLOC=malloc, tcache off; b_per_call is the RSS growth (glibc counts "
        "the growth as free arena chunks); median time per call (noisy: measured "
        "beside another corpus run). late_*: the same loop over 150,000 calls after "
        "2,000 warm-up (truth.py leak_pandas_read_csv_c --releases 2.1.4,2.2.1 --calls "
        "150000 --warmup 2000 --cap 200, 2026-11-25): the heap +55.5 and +55.7 B/call, "
        "+55.1 and +55.3 from call 75,000 on, RSS +0.9 and +0.6 B/call: the good and the "
        "fixed release keep a small leak of their own, steady over 8 MiB"
    ),
}


def setup(params):
    import io

    import numpy as np
    import pandas as pd
    pcp = np.ones((2700, 6100), dtype=np.float64)
    pcp[pcp < 0] = np.nan
    rows = int(params.get("rows", 300))
    text = "a,b,c,d,e\n" + "".join(f"{i},{i * 0.5},{i % 7},x{i},{i * 1.25}\n"
                                    for i in range(rows))
    return {"pd": pd, "io": io, "text": text, "pcp": pcp}


def step(state):
    state["pd"].read_csv(state["io"].StringIO(state["text"]), engine="c")
