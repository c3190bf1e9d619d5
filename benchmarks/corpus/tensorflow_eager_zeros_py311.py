"""TensorFlow on Python 3.11: every eager op call keeps ~72 bytes.

On CPython 3.11 a plain eager op in a loop, the report's ``tf.zeros(shape=(1,))``,
leaves Python objects behind on every call (the same loop on Python 3.10 does not
grow). Every TensorFlow release with a cp311 wheel from 2.12.0 (the first) to 2.16.1
leaks here: 72 B/call under tracemalloc in 2.12.0 and 2.15.0, 674 B/call in 2.16.1;
2.17.0 and 2.21.0 do not. The issue names 2.15 and tf-nightly; which change in 2.17
fixed it was not traced. With no release before 2.12.0 for Python 3.11, the case has
no good release: its controls are 2.17.0 and the other cases' good releases.

The step is the report's loop body, one eager ``tf.zeros(shape=(1,))``.

Truth, by hand, in each version's venv (``pip install tensorflow-cpu==X psutil``):
2,000 warm-up calls, gc.collect(), tracemalloc over 20,000 calls, then RSS (psutil)
over 100,000 more.
"""

CASE = {
    "title": "tensorflow (Python 3.11): eager tf.zeros leaks 72-674 B per call until 2.17",
    "kind": "leak",
    "link": "https://github.com/tensorflow/tensorflow/issues/62551",
    "package": "tensorflow-cpu",
    "versions": {"good": None, "bad": "2.12.0", "fixed": "2.17.0"},
    "extra": [],
    "params": {},
    "truth": {
        "2.12.0": {"b_per_call": 72},
        "2.17.0": {"b_per_call": 0},
    },
    "measured": (
        "tf.zeros(shape=(1,)) 2,000 times, gc.collect(), tracemalloc over 20,000 calls "
        "and RSS over 100,000 more: 2.12.0 72.3 / 97.1 B/call (numpy 1.23.5 as pip "
        "resolved it), 2.15.0 72.2 / 96.8, 2.16.1 673.5 / 674.7, 2.17.0 0.2 / 0.0, "
        "2.21.0 0.3 / 0.0."
    ),
}


def setup(params):
    import tensorflow as tf

    tf.zeros(shape=(1,))
    return {"zeros": tf.zeros}


def step(state):
    state["zeros"](shape=(1,))
