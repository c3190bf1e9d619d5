"""pandas 2.0 tracks which blocks share memory (copy-on-write's BlockValuesRefs): each
DataFrame.copy() adds a weak reference to the original's list of referencing blocks
and copy() never prunes the dead ones, so a frame copied in a loop grows its list for
good ("Leaving an application to run overnight leads a 32GB system to fully run out of
memory"). 1.5.3 had no such tracking; 2.1.1 prunes the dead references whenever it
adds one (PR 55008, "CoW: Clear dead references every time we add a new one").

The scenario is the report's loop: a 10,000 x 100 float frame with uuid4 column
labels, copied each call (`params` can shrink it).

Truth: benchmarks/corpuskit/truth.py leak_pandas_dataframe_copy (3000 calls after 200
warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "pandas: DataFrame.copy() keeps a dead weak reference per copy (2.0)",
    "kind": "leak",
    "link": "https://github.com/pandas-dev/pandas/issues/54352",
    "package": "pandas",
    "versions": {"good": "1.5.3", "bad": "2.0.0", "fixed": "2.1.1"},
    "extra": ["numpy==1.26.4"],
    "params": {"rows": 10000, "columns": 100},
    "truth": {
        "1.5.3": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 2999.01},
        "2.0.0": {"b_per_call": 209.0, "b_per_call_2nd_half": 207.8, "us_per_call": 5980.99},
        "2.1.1": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 1926.68},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_pandas_dataframe_copy: a plain loop in "
        "each release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call (noisy: measured "
        "beside another corpus run)"
    ),
}


def setup(params):
    from uuid import uuid4

    import numpy as np
    import pandas as pd
    rows, cols = int(params.get("rows", 10000)), int(params.get("columns", 100))
    columns = [uuid4() for _ in range(cols)]
    data = np.random.random((rows, cols))
    return {"df": pd.DataFrame(data=data, index=list(range(rows)), columns=columns)}


def step(state):
    state["df"].copy()
