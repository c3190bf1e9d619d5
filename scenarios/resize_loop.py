"""resize_loop: resize one image per step with scikit-image or OpenCV.

Reproduces the image-resize part of seed report 001 (shared/seeds/001_4f366c2694f9f634.txt):
memory_profiler blamed

    img = resize(img, [int(img.shape[0] * resize_factor),
                       int(img.shape[1] * resize_factor)],
                 preserve_range=True).astype(np.uint8)

(skimage.transform.resize) for RSS growth, and line_profiler showed skimage
``rescale(img, resize_factor, multichannel=True)`` >10x slower than
``cv2.resize(img, None, fx=resize_factor, fy=resize_factor)``.

Params (all optional):
  backend  skimage | cv2 | skimage_rescale   (default skimage)
           skimage:         skimage.transform.resize(img, (h', w'), preserve_range=True)
                            .astype(np.uint8)  -- the seed's line
           cv2:             cv2.resize(img, (w', h'))  (INTER_LINEAR)
           skimage_rescale: img_as_ubyte(skimage.transform.rescale(img, factor,
                            channel_axis=-1))  (multichannel=True on old skimage)
  size     "HxWxC" or "HxW" (or a list), uint8 random input image, default 720x1280x3
  factor   float > 0, default 0.5 (new size = int(H*factor) x int(W*factor))
  fresh    true | false, default false: make a new random input image every step
           (as a data pipeline would) instead of resizing the same one
  seed     int, default 0 (random image seed)

info() records numpy / scikit-image / OpenCV versions and the output shape.
"""

import _params  # shared param parsing (stdlib only), next to this file

_BACKENDS = ("skimage", "cv2", "skimage_rescale")

# validated in this order (the first bad one raises)
_PARAM_SPEC = {
    "backend": ("skimage", _BACKENDS),
    "factor": (0.5, ("float_gt", 0)),
    "seed": (0, "int_any"),
    "size": ("720x1280x3", "size"),
    "fresh": (False, "bool"),
}


def _parse_params(params):
    return _params.parse("resize_loop", params, _PARAM_SPEC)


def setup(params):
    p = _parse_params(params)
    try:
        import numpy as np
    except ImportError as exc:
        raise ImportError("resize_loop needs numpy: {}".format(exc))
    state = {"p": p, "np": np, "steps": 0, "out_shape": None}
    h, w, c = p["size"]
    nh, nw = max(1, int(h * p["factor"])), max(1, int(w * p["factor"]))
    state["new_hw"] = (nh, nw)
    if p["backend"] == "cv2":
        try:
            import cv2
        except ImportError as exc:
            raise ImportError("resize_loop backend=cv2 needs OpenCV (opencv-python[-headless]): {}".format(exc))
        state["cv2"] = cv2

        def do_resize(img):
            return cv2.resize(img, (nw, nh))
    else:
        try:
            import skimage
            from skimage.transform import resize, rescale
            from skimage import img_as_ubyte
        except ImportError as exc:
            raise ImportError("resize_loop backend={} needs scikit-image: {}".format(p["backend"], exc))
        state["skimage"] = skimage
        if p["backend"] == "skimage":
            new_shape = [nh, nw]

            def do_resize(img):
                return resize(img, new_shape, preserve_range=True).astype(np.uint8)
        else:
            import inspect
            try:
                has_axis = "channel_axis" in inspect.signature(rescale).parameters
            except Exception:
                has_axis = False
            if c == 1:
                kw = {}
            else:
                kw = {"channel_axis": -1} if has_axis else {"multichannel": True}
            factor = p["factor"]

            def do_resize(img):
                return img_as_ubyte(rescale(img, factor, **kw))
    state["resize"] = do_resize
    state["rng"] = np.random.RandomState(p["seed"])
    shape = (h, w) if c == 1 else (h, w, c)  # one channel: a 2-D grey image
    state["img"] = state["rng"].randint(0, 256, size=shape).astype(np.uint8)
    return state


def step(state):
    if state["p"]["fresh"]:
        img = state["rng"].randint(0, 256, size=state["img"].shape, dtype=state["np"].uint8)
    else:
        img = state["img"]
    out = state["resize"](img)
    state["out_shape"] = out.shape
    state["steps"] += 1


def info(state):
    np = state["np"]
    out = {
        "backend": state["p"]["backend"],
        "params": {"backend": state["p"]["backend"], "size": "x".join(str(d) for d in state["p"]["size"]),
                   "factor": state["p"]["factor"], "fresh": state["p"]["fresh"]},
        "numpy_version": np.__version__,
        "output_shape": list(state["out_shape"]) if state["out_shape"] is not None else None,
        "steps": state["steps"],
    }
    if "cv2" in state:
        cv2 = state["cv2"]
        out["opencv_version"] = cv2.__version__
        try:
            out["opencv_threads"] = cv2.getNumThreads()
        except Exception:
            pass
    if "skimage" in state:
        out["skimage_version"] = state["skimage"].__version__
        try:
            import scipy
            out["scipy_version"] = scipy.__version__
        except Exception:
            pass
    return out


def teardown(state):
    state["img"] = None
