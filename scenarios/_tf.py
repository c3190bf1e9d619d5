"""Shared TensorFlow plumbing for the TF scenario scripts in this folder.

The TF scenarios (conv_alloc, rfft_loop, tfdata_pipeline) run on TF 1.15 ... 2.x, so each
asks TF for the same things in the same version-tolerant way: import it with a clear error,
the version keys of info(), the GPUs it sees, which device to pin, and the allocator's
bytes through whichever API this TF has (``tf.config.experimental.get_memory_info`` on
TF >= 2.5, the ``tf.contrib.memory_stats`` ops on TF1 GPU builds). Those answers live here.

The allocator readings work on a scenario's state dict with the keys ``tf`` (the module),
``device`` ("gpu" or "cpu"), ``session`` (a Session or None), ``extra`` (the contrib stat
ops, possibly empty) and ``fw_api`` (None until the first reading decides it).

Stdlib only (TF and numpy are imported when a scenario asks) and Python 3.6 syntax: the
scenarios run inside old TF / Python containers. Found like ``_params``: the harness agent
puts a scenario's own directory first on sys.path (and mounts the whole directory into
containers), so scenarios can ``import _tf``.
"""

import os


def import_tf(scenario):
    """(numpy, tensorflow).

    Raises:
        ImportError: naming the scenario and what it needs, when either is missing.
    """
    try:
        import numpy as np
        import tensorflow as tf
    except ImportError as exc:
        raise ImportError("{} needs tensorflow (1.15 or 2.x) and numpy: {}".format(scenario, exc))
    return np, tf


def versions(tf, nvidia=True):
    """info()'s version keys: TF's version and git version and, with ``nvidia``, the NGC
    image's NVIDIA_TENSORFLOW_VERSION (None outside NGC images)."""
    out = {
        "tf_version": getattr(tf, "__version__", None),
        "tf_git_version": getattr(getattr(tf, "version", None), "GIT_VERSION", None),
    }
    if nvidia:
        out["nvidia_tensorflow_version"] = os.environ.get("NVIDIA_TENSORFLOW_VERSION")
    return out


def executing_eagerly(tf):
    """Whether TF runs eagerly now (False on TF1, which has no such switch on by default)."""
    return bool(getattr(tf, "executing_eagerly", lambda: False)())


def list_gpus(tf):
    """The GPUs TF sees (a list, maybe empty), or None where TF cannot list them."""
    try:
        lister = getattr(tf.config, "list_physical_devices", None) or \
            tf.config.experimental.list_physical_devices
        return lister("GPU")
    except Exception:
        return None


def set_memory_growth(tf):
    """Turn on memory growth for each GPU TF sees; a GPU that refuses (already set up) is
    left as it is."""
    for gpu in list_gpus(tf) or []:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except Exception:
            pass


def pick_device(scenario, tf, requested, has_gpu):
    """("gpu" | "cpu", its TF device name) for the ``device`` param (auto | cpu | gpu).

    Raises:
        RuntimeError: device=gpu was asked for and TF sees no GPU.
    """
    device = requested
    if device == "auto":
        device = "gpu" if has_gpu else "cpu"
    if device == "gpu" and not has_gpu:
        raise RuntimeError("{}: device=gpu requested but TF {} sees no GPU".format(
            scenario, tf.__version__))
    return device, ("/device:GPU:0" if device == "gpu" else "/device:CPU:0")


def memory_info_getter(tf):
    """tf.config.experimental.get_memory_info (TF >= 2.5), or None."""
    return getattr(getattr(tf.config, "experimental", None), "get_memory_info", None)


def memory_info(tf, device):
    """get_memory_info's {"current", "peak"} for GPU:0 ("gpu") or CPU:0 ("cpu"); None where
    TF has no such API. Raises whatever TF raises for a device it does not track."""
    getter = memory_info_getter(tf)
    if getter is None:
        return None
    return getter("GPU:0" if device == "gpu" else "CPU:0")


def contrib_memory_ops():
    """TF1's allocator stat ops ({"bytes_in_use", "max_bytes_in_use"}) in the graph and on
    the device being built, or {} where tf.contrib.memory_stats is missing."""
    try:
        from tensorflow.contrib.memory_stats import BytesInUse, MaxBytesInUse
        return {"bytes_in_use": BytesInUse(), "max_bytes_in_use": MaxBytesInUse()}
    except Exception:
        return {}


def contrib_stat(state, key):
    """The contrib stat op ``key`` run in the state's session, as an int; None without that
    op or a session, or when the run fails."""
    if key not in state["extra"] or state["session"] is None:
        return None
    try:
        return int(state["session"].run(state["extra"][key]))
    except Exception:
        return None


def fw_bytes(state, cpu_zero_is_unknown=False):
    """The allocator's current bytes on the state's device, or None.

    The first API that answers (get_memory_info, then the contrib ops) is kept in
    state["fw_api"]; "none" once neither does, so later calls cost nothing. With
    ``cpu_zero_is_unknown`` a CPU reading of 0 current and 0 peak (TF keeps no CPU
    allocator stats unless told to) is None, and the next call asks again.
    """
    api = state["fw_api"]
    if api == "none":
        return None
    if api in (None, "memory_info"):
        try:
            stats = memory_info(state["tf"], state["device"])
            if stats is not None:
                value = int(stats["current"])
                if cpu_zero_is_unknown and state["device"] != "gpu" and value == 0 \
                        and int(stats.get("peak", 0)) == 0:
                    return None
                state["fw_api"] = "memory_info"
                return value
        except Exception:
            pass
        if api == "memory_info":
            return None
    value = contrib_stat(state, "bytes_in_use")
    if value is not None:
        state["fw_api"] = "contrib"
        return value
    state["fw_api"] = "none"
    return None


def close_session(state):
    """Close the state's Session, if any, once."""
    sess = state.get("session")
    if sess is not None:
        state["session"] = None
        sess.close()
