"""rfft_loop: TF1-style graph that runs tf.signal.rfft (or fft/ifft/dct) once per step.

Reproduces seed report 000 (shared/seeds/000_28d548274b727520.txt; NVIDIA/tensorflow#76):
on nvidia-tensorflow 1.15.5 (NGC 22.12, RTX 4090) a loop of ``session.run(spec)`` with

    graph = tf.Graph()
    with graph.as_default():
        frames = tf.random.uniform((144, 400))
        spec = tf.signal.rfft(frames, [512, ])
    with tf.Session(graph=graph) as session:
        session.run(tf.global_variables_initializer())
        session.graph.finalize()
        for i in range(10000):
            session.run(spec)

grew RSS by ~23 KiB per call and got slower; with constant inputs (tf.zeros, numpy)
it did not. NGC 20.12 (TF 1.15.4) on an RTX 3090 was fine.

The graph is built with ``tf.compat.v1`` in an explicit ``tf.Graph`` and run by a
``tf.compat.v1.Session``, so the same file runs on TF 1.15 and on TF 2.x (eager stays
on for the rest of the process; nothing global is switched).

Params (all optional):
  input          random | zeros | numpy | variable          (default random)
                 random: tf.random.uniform each run (the seed's leaking case);
                 zeros: tf.zeros; numpy: a float32 numpy array baked in as a constant;
                 variable: a tf.Variable initialised once (the seed's other leaking case).
  op             rfft | fft | ifft | dct                     (default rfft)
                 rfft: tf.signal.rfft(frames, [512]); fft/ifft: on the frames cast to
                 complex64 and zero-padded to 512; dct: tf.signal.dct (type II).
  fold_constants true | false                                (default false)
                 false switches off grappler constant folding (and the classic graph
                 optimizer's folding), so constant inputs really execute the op every
                 step. With true (TF's default) TF 2.x on CPU folds rfft(zeros) into a
                 constant and the op never runs per step.
  device         auto | cpu | gpu                            (default auto: gpu if one is
                 visible to TF, else cpu)
  allow_growth   true | false                                (default false, TF's default;
                 true sets gpu_options.allow_growth / memory growth)

info() records the TF version (tf.__version__, tf.version.GIT_VERSION), the device, and
whether the transform op really ran per step: one extra traced ``session.run`` (RunOptions
SOFTWARE_TRACE, so no CUPTI is needed) whose step_stats are searched for the FFT node,
plus whether the op survived in the optimized partition graphs.
fw_bytes() reports the TF allocator's current bytes on the device where an API exists
(tf.config.experimental.get_memory_info in TF >= 2.5; tf.contrib.memory_stats on TF1 GPU),
else None.
"""

import time

import _params  # shared param parsing (stdlib only), next to this file
import _tf  # shared TensorFlow plumbing (stdlib only), next to this file

FRAMES_SHAPE = (144, 400)
FFT_LENGTH = 512

_PARAM_SPEC = {
    "input": ("random", ("random", "zeros", "numpy", "variable")),
    "op": ("rfft", ("rfft", "fft", "ifft", "dct")),
    "fold_constants": (False, "bool"),
    "device": ("auto", ("auto", "cpu", "gpu")),
    "allow_growth": (False, "bool"),
}

# op type names (as they appear in step_stats timeline labels / graph defs) per param
_OP_TYPES = {
    "rfft": ("RFFT",),
    "fft": ("FFT",),
    "ifft": ("IFFT",),
    "dct": ("RFFT", "FFT"),
}


def _parse_params(params):
    return _params.parse("rfft_loop", params, _PARAM_SPEC)


def _gpu_available(tf):
    gpus = _tf.list_gpus(tf)
    if gpus is not None:
        return len(gpus) > 0
    try:
        return bool(tf.test.is_gpu_available())
    except Exception:
        return False


def _session_config(tf, fold_constants, allow_growth, device):
    v1 = tf.compat.v1
    config = v1.ConfigProto()
    # ops without a kernel on the pinned device (e.g. dct's shape helpers) fall back to CPU;
    # info() records on which device the FFT node really ran
    config.allow_soft_placement = True
    if allow_growth:
        config.gpu_options.allow_growth = True
    if not fold_constants:
        from tensorflow.core.protobuf import rewriter_config_pb2
        rw = config.graph_options.rewrite_options
        rw.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
        # the classic (pre-grappler) graph optimizer folds constants too
        opts = config.graph_options.optimizer_options
        opts.do_constant_folding = False
        opts.opt_level = v1.OptimizerOptions.L0
    if device == "cpu":
        config.device_count["GPU"] = 0
    return config


def _build_graph(tf, np, p, device_name):
    v1 = tf.compat.v1
    graph = tf.Graph()
    extra = {}
    with graph.as_default():
        with graph.device(device_name):
            if p["input"] == "random":
                frames = v1.random.uniform(FRAMES_SHAPE, name="frames")
            elif p["input"] == "zeros":
                frames = tf.zeros(FRAMES_SHAPE, name="frames")
            elif p["input"] == "numpy":
                arr = np.random.RandomState(0).random_sample(FRAMES_SHAPE).astype(np.float32)
                frames = tf.convert_to_tensor(arr, name="frames")
            else:  # variable
                var = v1.Variable(v1.random.uniform(FRAMES_SHAPE), name="frames_var")
                frames = tf.identity(var, name="frames")
            op = p["op"]
            if op == "rfft":
                spec = tf.signal.rfft(frames, [FFT_LENGTH], name="spec")
            elif op in ("fft", "ifft"):
                padded = tf.pad(frames, [[0, 0], [0, FFT_LENGTH - FRAMES_SHAPE[1]]])
                cplx = tf.cast(padded, tf.complex64)
                fn = tf.signal.fft if op == "fft" else tf.signal.ifft
                spec = fn(cplx, name="spec")
            else:  # dct
                spec = tf.signal.dct(frames, type=2, name="spec")
        init = v1.global_variables_initializer()
        # TF1: allocator stats ops (contrib) for fw_bytes where get_memory_info is missing
        if device_name.startswith("/device:GPU") and _tf.memory_info_getter(tf) is None:
            with graph.device(device_name):
                extra = _tf.contrib_memory_ops()
    return graph, spec, init, extra


def setup(params):
    p = _parse_params(params)
    np, tf = _tf.import_tf("rfft_loop")
    if not hasattr(tf, "compat") or not hasattr(tf.compat, "v1"):
        raise ImportError("rfft_loop needs tf.compat.v1 (TF >= 1.13), got TF {}".format(tf.__version__))
    if p["allow_growth"]:
        _tf.set_memory_growth(tf)
    device, device_name = _tf.pick_device("rfft_loop", tf, p["device"], _gpu_available(tf))

    graph, spec, init, extra = _build_graph(tf, np, p, device_name)
    config = _session_config(tf, p["fold_constants"], p["allow_growth"], device)
    session = tf.compat.v1.Session(graph=graph, config=config)
    session.run(init)
    graph.finalize()
    state = {
        "tf": tf,
        "p": p,
        "device": device,
        "device_name": device_name,
        "graph": graph,
        "session": session,
        "spec": spec,
        "extra": extra,
        "fw_api": None,  # decided on the first fw_bytes() call
        "trace": None,
        "steps": 0,
    }
    return state


def step(state):
    state["session"].run(state["spec"])
    state["steps"] += 1


def _trace(state):
    """One extra traced run: did the transform op execute, and did it survive optimization?"""
    if state["trace"] is not None or state["session"] is None:
        return state["trace"]
    tf = state["tf"]
    v1 = tf.compat.v1
    result = {}
    try:
        opts = v1.RunOptions(trace_level=v1.RunOptions.SOFTWARE_TRACE,
                             output_partition_graphs=True)
        md = v1.RunMetadata()
        t0 = time.perf_counter() if hasattr(time, "perf_counter") else time.time()
        state["session"].run(state["spec"], options=opts, run_metadata=md)
        t1 = time.perf_counter() if hasattr(time, "perf_counter") else time.time()
        wanted = _OP_TYPES[state["p"]["op"]]
        ran = []
        executed_nodes = 0
        for dev in md.step_stats.dev_stats:
            for ns in dev.node_stats:
                executed_nodes += 1
                label = ns.timeline_label or ""
                # timeline_label looks like "name = OpType(inputs)"
                optype = ""
                if " = " in label:
                    optype = label.split(" = ", 1)[1].split("(", 1)[0].strip()
                if optype in wanted:
                    ran.append({"device": dev.device, "node": ns.node_name, "op": optype,
                                "us": int(ns.all_end_rel_micros or
                                          (ns.op_end_rel_micros - ns.op_start_rel_micros))})
        in_graph = []
        for gd in md.partition_graphs:
            for node in gd.node:
                if node.op in wanted:
                    in_graph.append(node.name)
        result = {
            "op_ran": bool(ran),
            "op_nodes_ran": ran[:8],
            "op_in_optimized_graph": bool(in_graph),
            "executed_nodes": executed_nodes,
            "traced_run_s": round(t1 - t0, 6),
        }
    except Exception as exc:  # tracing is diagnostic only
        result = {"op_ran": None, "trace_error": "{}: {}".format(type(exc).__name__, exc)}
    state["trace"] = result
    return result


def fw_bytes(state):
    return _tf.fw_bytes(state, cpu_zero_is_unknown=True)


def info(state):
    tf = state["tf"]
    out = _tf.versions(tf)
    out.update({
        "device": state["device"],
        "device_name": state["device_name"],
        "params": dict(state["p"]),
        "steps": state["steps"],
        "fw_bytes_api": state["fw_api"],
    })
    try:
        build = tf.sysconfig.get_build_info()
        out["tf_build"] = {k: build.get(k) for k in ("cuda_version", "cudnn_version", "is_cuda_build")
                           if k in build}
    except Exception:
        pass
    out.update(_trace(state) or {})
    if _tf.memory_info_getter(tf) is not None:
        try:
            out["fw_peak_bytes"] = int(_tf.memory_info(tf, state["device"])["peak"])
        except Exception:
            pass
    else:
        peak = _tf.contrib_stat(state, "max_bytes_in_use")
        if peak is not None:
            out["fw_peak_bytes"] = peak
    return out


def teardown(state):
    # capture the trace before the session goes away, whichever of info/teardown comes first
    _trace(state)
    _tf.close_session(state)
