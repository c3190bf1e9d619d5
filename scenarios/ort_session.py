"""ort_session: onnxruntime inference in a loop on a small model built in setup().

Reproduces seed report 003 (shared/seeds/003_878995a3ca72dd45.txt): wenet's C++
onnxruntime runtime leaked the input/output names and the model metadata strings that
onnxruntime hands out through its allocator (found with valgrind; 21 then 11 leaks, one
per metadata entry). Here the Python binding does the same calls: with
``query_meta=true`` each step also reads input/output names and the model metadata
(custom_metadata_map, with as many entries as wenet's models have), so a leak in that
path shows up as growth per step.

The model is built with onnx.helper, nothing is downloaded: an encoder-like block
X[batch, seq, dim] -> MatMul(dim x hidden) -> Add -> Relu -> MatMul(hidden x dim) -> Add
-> Y[batch, seq, dim] with dynamic batch and seq dims (opset 13, IR version 7, which every
onnxruntime >= 1.8 loads). It is passed to InferenceSession as bytes.

Params (all optional):
  shapes            fixed | varying             (default fixed)
                    fixed: every step feeds [batch, seq, dim];
                    varying: cycles through seq lengths 8, 64, 256, 32, 512, 16, 128, 384
                    (x batch) so the CPU arena ratchets up to the largest and then
                    plateaus.
  ramp              int >= 0, default 0: with shapes=varying and ramp > 0, the seq lengths
                    are used in increasing order and one more (larger) length joins the
                    cycle every ``ramp`` steps, so the arena ratchets up for
                    8 * ramp steps and then plateaus (visible after the harness's warm-up)
  session_per_step  false | true                (default false) create a new
                    InferenceSession every step (and drop it after one run)
  arena             true | false                (default true) SessionOptions.enable_cpu_mem_arena
  query_meta        false | true                (default false) also read input/output names
                    and model metadata every step (the seed's leaking calls)
  provider          cpu | cuda | auto           (default cpu; auto = CUDA if available)
  batch             int >= 1, default 1
  seq               int >= 1, default 128 (fixed shapes)
  dim               int >= 1, default 256
  hidden            int >= 1, default 1024
  threads           int >= 0, default 1 (intra_op_num_threads; 0 = onnxruntime default)

info() records onnxruntime / onnx / numpy versions, the providers, the model's opset and
IR version, and the largest shape fed.
"""

import os

import _params  # shared param parsing (stdlib only), next to this file

_SEQ_CYCLE = (8, 64, 256, 32, 512, 16, 128, 384)
_N_META = 11  # wenet's models carry 11 metadata entries

_PARAM_SPEC = {
    "shapes": ("fixed", ("fixed", "varying")),
    "session_per_step": (False, "bool"),
    "arena": (True, "bool"),
    "query_meta": (False, "bool"),
    "provider": ("cpu", ("cpu", "cuda", "auto")),
    "batch": (1, ("int", 1)),
    "seq": (128, ("int", 1)),
    "dim": (256, ("int", 1)),
    "hidden": (1024, ("int", 1)),
    "threads": (1, ("int", 0)),
    "ramp": (0, ("int", 0)),
}


def _parse_params(params):
    return _params.parse("ort_session", params, _PARAM_SPEC)


def _build_model(onnx, np, dim, hidden):
    from onnx import helper, TensorProto, numpy_helper
    rng = np.random.RandomState(0)
    w1 = (rng.standard_normal((dim, hidden)) / np.sqrt(dim)).astype(np.float32)
    b1 = (rng.standard_normal((hidden,)) * 0.01).astype(np.float32)
    w2 = (rng.standard_normal((hidden, dim)) / np.sqrt(hidden)).astype(np.float32)
    b2 = np.zeros((dim,), dtype=np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
             numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="mm1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="add1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="mm2"),
        helper.make_node("Add", ["h3", "b2"], ["y"], name="add2"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", dim])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", dim])
    graph = helper.make_graph(nodes, "harness_ort_block", [x], [y], initializer=inits)
    model = helper.make_model(graph, producer_name="harness",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    meta = {"subsampling_rate": "4", "right_context": "6", "sos_symbol": "5537", "eos_symbol": "5537",
            "is_bidirectional_decoder": "1", "output_size": str(dim), "num_blocks": "12",
            "cnn_module_kernel": "15", "head": "4", "feature_size": "80", "vocab_size": "5538"}
    assert len(meta) == _N_META
    helper.set_model_props(model, meta)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _make_session(state):
    ort = state["ort"]
    opts = ort.SessionOptions()
    opts.enable_cpu_mem_arena = state["p"]["arena"]
    if state["p"]["threads"]:
        opts.intra_op_num_threads = state["p"]["threads"]
    kwargs = {}
    if state["providers"] is not None:
        kwargs["providers"] = state["providers"]
    return ort.InferenceSession(state["model"], sess_options=opts, **kwargs)


def setup(params):
    p = _parse_params(params)
    try:
        import numpy as np
        import onnx
        import onnxruntime as ort
    except ImportError as exc:
        raise ImportError("ort_session needs onnxruntime, onnx and numpy: {}".format(exc))
    available = list(ort.get_available_providers()) if hasattr(ort, "get_available_providers") else []
    provider = p["provider"]
    if provider == "auto":
        provider = "cuda" if "CUDAExecutionProvider" in available else "cpu"
    if provider == "cuda":
        if "CUDAExecutionProvider" not in available:
            raise RuntimeError("ort_session: provider=cuda but onnxruntime {} offers only {}".format(
                ort.__version__, available))
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"] if available else None
    state = {"p": p, "np": np, "onnx": onnx, "ort": ort, "providers": providers,
             "provider": provider, "steps": 0, "max_shape": None, "meta_seen": None}
    state["model"] = _build_model(onnx, np, p["dim"], p["hidden"])
    rng = np.random.RandomState(1)
    if p["shapes"] == "fixed":
        seqs = (p["seq"],)
    else:
        seqs = sorted(_SEQ_CYCLE) if p["ramp"] else _SEQ_CYCLE
    state["inputs"] = [rng.standard_normal((p["batch"], s, p["dim"])).astype(np.float32) for s in seqs]
    state["max_shape"] = list(max((a.shape for a in state["inputs"]), key=lambda s: s[1]))
    state["session"] = None if p["session_per_step"] else _make_session(state)
    if state["session"] is not None:
        state["session_providers"] = state["session"].get_providers()
    return state


def step(state):
    sess = state["session"]
    if sess is None:
        sess = _make_session(state)
    if state["p"]["query_meta"]:
        in_names = [i.name for i in sess.get_inputs()]
        out_names = [o.name for o in sess.get_outputs()]
        meta = sess.get_modelmeta()
        state["meta_seen"] = len(meta.custom_metadata_map)
        _ = (in_names, out_names, meta.graph_name, meta.description, meta.domain, meta.version)
    else:
        in_names, out_names = ["x"], ["y"]
    inputs = state["inputs"]
    n = len(inputs)
    ramp = state["p"]["ramp"]
    if ramp and n > 1:
        n = min(n, 1 + state["steps"] // ramp)
    x = inputs[state["steps"] % n]
    sess.run(out_names, {in_names[0]: x})
    state["steps"] += 1


def info(state):
    out = {
        "onnxruntime_version": state["ort"].__version__,
        "onnx_version": state["onnx"].__version__,
        "numpy_version": state["np"].__version__,
        "provider": state["provider"],
        "providers_requested": state["providers"],
        "session_providers": state.get("session_providers"),
        "available_providers": list(state["ort"].get_available_providers())
        if hasattr(state["ort"], "get_available_providers") else None,
        "model_opset": 13,
        "model_ir_version": 7,
        "model_bytes": len(state["model"]),
        "shapes_cycle": [list(a.shape) for a in state["inputs"]],
        "max_input_shape": state["max_shape"],
        "metadata_entries_seen": state["meta_seen"],
        "steps": state["steps"],
        "params": dict(state["p"]),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    try:
        out["ort_device"] = state["ort"].get_device()
    except Exception:
        pass
    return out


def teardown(state):
    state["session"] = None
