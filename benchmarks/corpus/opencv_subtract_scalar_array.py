"""opencv: cv2.subtract(img, small 1-D array) leaks one Python number per element.

OpenCV 4.9.0 taught the Python bindings to take a 1-D array of up to four numbers as the
scalar operand of add/subtract/... (opencv/opencv#24074). The new conversion reads each
element with PyArray_GETITEM, which returns a new reference, and never drops it: every
call keeps one Python float per element (4 x 24 B, ~96 B/call under tracemalloc). Fixed
by opencv/opencv#27738, first released in 4.13.0.

The step is the report's loop: subtract a per-channel value array from a uint8 image. A
four-element float64 array is used so that 4.8.1 (before the new path) takes the same
call without raising.

Truth, by hand, in each version's venv (CPython 3.11, numpy 1.26.4): 1,000 warm-up
calls, then tracemalloc traced memory over 5,000 calls after gc.collect(); RSS over
50,000 more calls (psutil).
"""

CASE = {
    "title": "opencv: cv2.subtract with a 1-D scalar array leaks its elements",
    "kind": "leak",
    "link": "https://github.com/opencv/opencv/issues/27171",
    "package": "opencv-python-headless",
    "versions": {"good": "4.8.1.78", "bad": "4.9.0.80", "fixed": None},
    "extra": ["numpy==1.26.4"],
    "params": {},
    "truth": {
        "4.8.1.78": {"b_per_call": 0},
        "4.9.0.80": {"b_per_call": 96},
    },
    "measured": (
        "img = uint8 64x64x3 random, val = np.array([10.0, 20.0, 30.0, 0.0]); "
        "cv2.subtract(img, val) 1,000 times, gc.collect(), then tracemalloc over 5,000 "
        "calls: 4.8.1.78 0.2 B/call, 4.9.0.80 96.2 B/call (RSS 128 B/call over 50,000). "
        "4.12.0.88 (numpy 2.2.6) 96.2 B/call; the fix, 4.13.0.90 (numpy 2.2.6), 0.2 B/call. "
        "fixed is None here because 4.13 needs numpy>=2, which 4.8/4.9 cannot import: one "
        "'extra' list cannot serve both."
    ),
}


def setup(params):
    import cv2
    import numpy as np

    rng = np.random.RandomState(0)
    img = rng.randint(0, 256, size=(64, 64, 3)).astype(np.uint8)
    return {"cv2": cv2, "img": img, "val": np.array([10.0, 20.0, 30.0, 0.0])}


def step(state):
    state["cv2"].subtract(state["img"], state["val"])
