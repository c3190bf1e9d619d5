"""opencv 4.12: cv2.compare(image, scalar, CMP_GE) is far slower than in 4.11.

The report (C++ on Windows) timed ``cv::compare(mat, 235.0f, mask, CMP_GE)`` on a random
uint8 image: ~4 ms in 4.11, ~15 ms in 4.12, and 4 ms again when 4.12 was built without
IPP. Through the Python wheels on Linux the same call is ~70x slower in 4.12.0.88 than
in 4.11.0.86, and 4.13.0.90 is back at 4.11's time. The size of the slowdown here is
larger than the report's, and which change in 4.12 causes it on Linux was not traced;
what is measured is the report's call and releases.

The step is the report's loop body on a 2000x2000 random uint8 image (the report's
5000x5000 made smaller so a call takes milliseconds), OpenCV held to one thread.

Truth, by hand: median CPU time per call (time.process_time) of 5 blocks of 20 calls
after one warm-up call; 4.11.0.86, 4.12.0.88 and 4.13.0.90 run in turn, three rounds
(numpy 2.2.6 in each venv).
"""

CASE = {
    "title": "opencv: cv2.compare(img, scalar, CMP_GE) ~70x slower in 4.12",
    "kind": "slowdown",
    "link": "https://github.com/opencv/opencv/issues/28251",
    "package": "opencv-python-headless",
    "versions": {"good": "4.11.0.86", "bad": "4.12.0.88", "fixed": "4.13.0.90"},
    "extra": ["numpy==2.2.6"],
    "params": {},
    "truth": {
        "4.11.0.86": {"us_per_call": 237},
        "4.12.0.88": {"us_per_call": 17086},
        "4.13.0.90": {"us_per_call": 245},
    },
    "measured": (
        "cv2.setNumThreads(1); m = 2000x2000 random uint8; cv2.compare(m, 235.0, "
        "cv2.CMP_GE) once, then 5 blocks of 20 calls, median CPU us/call; rounds: "
        "4.11.0.86 237/180, 4.12.0.88 17525/15910/17086/17177, 4.13.0.90 "
        "220/217/271/245 (4.9.0.80 with numpy 1.26.4: 193); bad/good ~70x."
    ),
}


def setup(params):
    import cv2
    import numpy as np

    cv2.setNumThreads(1)
    rng = np.random.RandomState(0)
    img = rng.randint(0, 256, size=(2000, 2000)).astype(np.uint8)
    return {"cv2": cv2, "img": img}


def step(state):
    cv2 = state["cv2"]
    cv2.compare(state["img"], 235.0, cv2.CMP_GE)
