"""pandas 2.1.1: iterating the columns of a wide DataFrame is quadratic.

pandas 2.1.1 (PR 55008) made ``BlockValuesRefs.add_reference`` clear the dead weak
references from the block's reference list every time it adds one. Every column
Series that ``DataFrame.items()`` makes adds a reference to the same block and stays
alive in the caller's list, so each addition scans all the earlier ones: taking the
columns of a frame of N columns costs O(N^2). The report (issue 55245) found
``hash_pandas_object(df.T.reset_index())`` of a 50-row frame growing polynomially with
the columns on 2.1.1; in PR 55008's thread a maintainer reduced it, with the other
reports of the same cause, to ``list(df.items())`` of a 50 x 10,000 frame: 4.33 ms on
2.1.0 and 1.13 s on 2.1.1. 2.1.2 clears the list with an exponential backoff (PR
55518) and is back at 2.1.0's time.

The step is that reduction: a fresh ``pd.DataFrame(arr)`` of a 50 x 4,000 float array
built once in setup (fresh, so that the frame's item cache does not hand back the
Series of the previous call), then ``list(df.items())``.

Truth, by hand: median CPU time per call (time.process_time) of 5 blocks of 2 calls
after one warm-up call; 2.1.0, 2.1.1 and 2.1.2 (numpy 1.26.4 in each) run in turn,
three rounds.
"""

CASE = {
    "title": "pandas: list(df.items()) of a wide frame quadratic in 2.1.1",
    "kind": "slowdown",
    "link": "https://github.com/pandas-dev/pandas/issues/55245",
    "package": "pandas",
    "versions": {"good": "2.1.0", "bad": "2.1.1", "fixed": "2.1.2"},
    "extra": ["numpy==1.26.4"],
    "params": {"columns": 4000},
    "truth": {
        "2.1.0": {"us_per_call": 65762},
        "2.1.1": {"us_per_call": 193165},
        "2.1.2": {"us_per_call": 67178},
    },
    "measured": (
        "setup() once, step() once, then 5 blocks of 2 calls, median CPU us/call; three "
        "rounds, releases in turn: 2.1.0 65762/68229/64551, 2.1.1 196835/186785/193165, "
        "2.1.2 66582/68454/67178; bad/good 2.9x, fixed/good 1.02x (medians of the "
        "rounds). The ratio grows with the columns (quadratic): at 2,000 columns 2.1.0 "
        "36701, 2.1.1 64282, 2.1.2 36118 us/call (1.75x); at 5,000 87229, 304552, "
        "111975 (3.5x). The report's own loop (hash_pandas_object(df.T.reset_index()) of "
        "a 4,000 x 50 frame, 5 calls, one round): 2.1.0 160973, 2.1.1 308148, 2.1.2 "
        "167576 us/call (1.9x)."
    ),
}


def setup(params):
    import numpy as np
    import pandas as pd

    arr = np.random.default_rng(0).normal(size=(50, int(params.get("columns", 4000))))
    return {"frame": pd.DataFrame, "arr": arr}


def step(state):
    df = state["frame"](state["arr"])
    list(df.items())
