"""Control, slow misses: tf.function's trace cache over a finite set of input shapes.

A `tf.function` traces and builds a new concrete function for every input signature it
has not seen (`reduce_retracing=False`, the default), and keeps each for good in the
function's cache (tensorflow/core/function/polymorphism/function_cache.py). The scenario
calls one small function (`rfft` of `x * 2 + 1`, summed) on float32 vectors whose
lengths cycle through `shapes` values (8 .. 8 + shapes - 1), as a service fed requests
of many lengths meets them. Every first length costs a trace, ~23 ms a call on a
2-core EPYC; every later one ~0.5 ms. So the fill lasts `shapes` slow calls (800: ~17 s,
longer than harness's 200-call warm-up, default 5 s budget and 300-call least), ~200 KiB of
heap each, and then stops: the trace cache of a clean release, not a leak. Its misses
are slow, so a run budgeted in seconds sees only the fill (the class of dateparser's
locale data: a fill longer than the budget), and a run of 3/2 the shapes' calls sees it
stop.

Truth "no leak": -0.14 B/call over 4,800 calls after a 2,400-call warm-up (three
cycles); the fill is ~156 MiB over the first 800 calls, ~200 KiB of heap a shape.
"""

CASE = {
    "title": "control: tf.function retracing over 800 input shapes (slow misses, bounded)",
    "kind": "control",
    "link": "https://www.tensorflow.org/guide/function#controlling_retracing",
    "package": "tensorflow-cpu",
    "versions": {"good": "2.17.0"},
    "extra": [],
    "params": {"shapes": 800},
    "truth": {
        "2.17.0": {"b_per_call": -0.14, "b_per_call_2nd_half": 0.02, "us_per_call": 529.11},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_tf_function_retrace_shapes --warmup 2400 "
        "--calls 4800 --cap 200: a plain loop in the release's venv, 2,400 warm-up calls "
        "(three whole cycles of the 800 shapes), then 4,800 calls (six); glibc heap in "
        "use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off: -0.14 B/call (+0.02 in the second half), RSS "
        "+11.09 B/call, 529 us a call (median). The fill: --warmup 0 --calls 2400 gave "
        "68,030 B/call over the 2,400 calls (~156 MiB in all, ~200 KiB a shape), -0.01 "
        "B/call in their second half; median 21.1 ms a call over the first half, 0.52 ms "
        "over the second (a 2-core AMD EPYC, 2026-11-25). First tried with 400 shapes "
        "(-0.17 B/call over 2,400 calls after 1,200): harness's 200-call warm-up and "
        "300-call least outlasted that fill, so it was no case of the class"
    ),
    "batch": "49e",
}


def setup(params):
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")

    @tf.function
    def spectrum(x):
        return tf.reduce_sum(tf.math.abs(tf.signal.rfft(x * 2.0 + 1.0)))

    n = int(params.get("shapes", 800))
    inputs = [tf.constant(np.ones(8 + k, np.float32)) for k in range(n)]
    return {"f": spectrum, "inputs": inputs, "n": 0}


def step(state):
    inputs = state["inputs"]
    x = inputs[state["n"] % len(inputs)]
    state["n"] += 1
    return state["f"](x)
