"""pandas 2.2.0's C parser (read_csv, engine="c") keeps memory of its tokenizer after
each parse (fixed by PR 57084, "Fix mem leak in read_csv"). The report's loop, 1000
read_csv calls on a small file, grew to 3.2 GB of RSS; it showed only after the
program had used np.nan in a large array (the report's `pcp` lines, kept here). 2.1.4
is clean; 2.2.1 carries the fix.

The scenario parses a 2000-row, five-column CSV from memory each call (the report's
file is not published; at 100 rows no growth shows in any release).

The growth shows in RSS, not in the heap in use: glibc's arena grows by about 1.5 MB a
call in 2.2.0 and mallinfo2 counts it as free chunks (200 calls by hand: arena
+1572925 B/call, in use +532, free +1572393, RSS +482058). So this case's
`b_per_call` is truth.py's RSS growth per call; the heap-in-use figure (kept as
`heap_b_per_call`) grows about 100 B a call in every release, 2.1.4 and 2.2.1 included,
and 300 B more in 2.2.0.

Truth: benchmarks/corpuskit/truth.py leak_pandas_read_csv_c --calls 1500 (after 200
warm-up, RSS and heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "pandas: read_csv(engine='c') keeps its tokenizer buffers (2.2.0)",
    "kind": "leak",
    "link": "https://github.com/pandas-dev/pandas/issues/57039",
    "package": "pandas",
    "versions": {"good": "2.1.4", "bad": "2.2.0", "fixed": "2.2.1"},
    "extra": ["numpy==1.26.4"],
    "params": {"rows": 2000},
    "truth": {
        "2.1.4": {"b_per_call": 142.0, "heap_b_per_call": 92.2, "us_per_call": 4322.5},
        "2.2.0": {"b_per_call": 939133.6, "heap_b_per_call": 391.2,
                  "us_per_call": 11120.2},
        "2.2.1": {"b_per_call": 147.5, "heap_b_per_call": 112.6, "us_per_call": 2264.85},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_pandas_read_csv_c --calls 1500: a plain "
        "loop in each release's venv, 200 warm-up calls, then 1500 calls; RSS and "
        "glibc heap in use (mallinfo2) after gc.collect() before and after, "
        "PYTHONMALLOC=malloc, tcache off; b_per_call is the RSS growth (glibc counts "
        "the growth as free arena chunks); median time per call (noisy: measured "
        "beside another corpus run)"
    ),
}


def setup(params):
    import io

    import numpy as np
    import pandas as pd
    pcp = np.ones((2700, 6100), dtype=np.float64)
    pcp[pcp < 0] = np.nan
    rows = int(params.get("rows", 100))
    text = "a,b,c,d,e\n" + "".join(f"{i},{i * 0.5},{i % 7},x{i},{i * 1.25}\n"
                                    for i in range(rows))
    return {"pd": pd, "io": io, "text": text, "pcp": pcp}


def step(state):
    state["pd"].read_csv(state["io"].StringIO(state["text"]), engine="c")
