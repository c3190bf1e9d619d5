"""conv_alloc: forward + backward of a UNet-style conv net; memory scales with the frame size.

Reproduces seed report 004 (shared/seeds/004_e6e4d1ef4a3adc1b.txt): a TF1 flow-estimation
UNet (conv -> bias_add -> batch_normalization -> relu layers, two stride-2 downsamples,
two bilinear upsamples with skip adds) on 1280x720 frames (3 frames x 3 channels = 9 input
channels, 64 base channels) ran out of memory at batch 2; the OOM report listed ~450 MiB per
full-resolution activation. This script builds the same topology with ``channels`` base
channels and ``layers`` convs at full resolution, and runs one training step (forward,
backward, SGD update) per step().

Implementations (param ``mode``):
  function  TF 2.x: tf.GradientTape inside a tf.function (default on TF 2.x)
  eager     TF 2.x: the same without tf.function
  graph     tf.compat.v1 graph + GradientDescentOptimizer.minimize + Session.run
            (default on TF 1.x; works on TF 2.x too)
Only tf.nn / tf.image / tf.Variable are used (no Keras), so TF 1.15 ... 2.21 all work.

Params (all optional):
  height     int >= 8, default 128      (seed: 720)
  width      int >= 8, default 128      (seed: 1280)
  batch      int >= 1, default 1        (seed: 2 OOMs)
  channels   int >= 1, default 16       (base channels; seed: 64)
  in_channels int >= 1, default 9       (seed: 3 RGB frames stacked)
  layers     int >= 1, default 3        (convs at full resolution before the first
                                         downsample; seed: 3)
  batchnorm  true | false, default true (tf.nn.moments + tf.nn.batch_normalization)
  mode       auto | function | eager | graph, default auto
  device     auto | cpu | gpu, default auto (gpu if TF sees one)
  allow_growth true | false, default false (TF's default; true = GPU memory growth)

A full-resolution activation is batch*height*width*channels*4 bytes; the net keeps several
alive for the backward pass, so e.g. height=720 width=1280 batch=2 channels=64 needs several
GiB (the seed's OOM) and channels=16 still over 1 GiB.
fw_bytes() reports tf.config.experimental.get_memory_info(device)['current'] (TF >= 2.5;
on TF1 GPU tf.contrib.memory_stats.BytesInUse), info() the allocator peak.
"""

import _params  # shared param parsing (stdlib only), next to this file
import _tf  # shared TensorFlow plumbing (stdlib only), next to this file

_PARAM_SPEC = {
    "height": (128, ("int", 8)),
    "width": (128, ("int", 8)),
    "batch": (1, ("int", 1)),
    "channels": (16, ("int", 1)),
    "in_channels": (9, ("int", 1)),
    "layers": (3, ("int", 1)),
    "batchnorm": (True, "bool"),
    "mode": ("auto", ("auto", "function", "eager", "graph")),
    "device": ("auto", ("auto", "cpu", "gpu")),
    "allow_growth": (False, "bool"),
}

_LR = 1e-4


def _parse_params(params):
    return _params.parse("conv_alloc", params, _PARAM_SPEC)


def _var_specs(p):
    """(name, shape, stddev or None for zeros / 'ones') for every trainable variable."""
    c, cin = p["channels"], p["in_channels"]
    convs = []  # (name, kin, kout)
    prev = cin
    for i in range(p["layers"]):
        convs.append(("unet_{:02d}".format(i), prev, c))
        prev = c
    k = p["layers"]
    names = ["unet_{:02d}".format(k + j) for j in range(9)]
    convs += [
        (names[0], c, 2 * c),          # stride 2
        (names[1], 2 * c, 2 * c),
        (names[2], 2 * c, 4 * c),      # stride 2
        (names[3], 4 * c, 4 * c),
        (names[4], 4 * c, 2 * c),      # after upsample to H/2, + skip
        (names[5], 2 * c, 2 * c),
        (names[6], 2 * c, c),          # after upsample to H, + skip
        (names[7], c, c),
        (names[8], c, 3),              # output: flow (B, H, W, 3)
    ]
    return convs


def _forward(tf, p, variables, x):
    """UNet forward pass on x (B, H, W, in_channels); returns (B, H, W, 3)."""
    convs = _var_specs(p)
    h = tf.shape(x)[1]
    w = tf.shape(x)[2]

    def layer(idx, t, stride, relu=True):
        name = convs[idx][0]
        out = tf.nn.conv2d(t, variables[name + "_w"], strides=[1, stride, stride, 1], padding="SAME")
        out = tf.nn.bias_add(out, variables[name + "_b"])
        if p["batchnorm"] and idx < len(convs) - 1:
            mean, var = tf.nn.moments(out, axes=[0, 1, 2])
            out = tf.nn.batch_normalization(out, mean, var, variables[name + "_beta"],
                                            variables[name + "_gamma"], 1e-3)
        return tf.nn.relu(out) if relu else out

    L = p["layers"]
    t = x
    for i in range(L):
        t = layer(i, t, 1)
    skip_full = t
    t = layer(L + 0, t, 2)
    t = layer(L + 1, t, 1)
    skip_half = t
    t = layer(L + 2, t, 2)
    t = layer(L + 3, t, 1)
    # bilinear, as the seed's tf.image.resize_images
    resize = getattr(tf.image, "resize", None) or tf.compat.v1.image.resize_images
    t = resize(t, tf.stack([(h + 1) // 2, (w + 1) // 2]))
    t = layer(L + 4, t, 1, relu=False)
    t = tf.nn.relu(t + skip_half)
    t = layer(L + 5, t, 1)
    t = resize(t, tf.stack([h, w]))
    t = layer(L + 6, t, 1, relu=False)
    t = tf.nn.relu(t + skip_full)
    t = layer(L + 7, t, 1)
    return layer(L + 8, t, 1, relu=False)


def _make_variables(tf, np, p, variable_ctor):
    rng = np.random.RandomState(0)
    variables = {}
    specs = _var_specs(p)
    for idx, (name, kin, kout) in enumerate(specs):
        std = np.sqrt(2.0 / 9.0 / float(kin))
        variables[name + "_w"] = variable_ctor(
            (rng.standard_normal((3, 3, kin, kout)) * std).astype(np.float32), name + "_w")
        variables[name + "_b"] = variable_ctor(np.zeros((kout,), np.float32), name + "_b")
        if p["batchnorm"] and idx < len(specs) - 1:  # no batch norm on the output conv
            variables[name + "_gamma"] = variable_ctor(np.ones((kout,), np.float32), name + "_gamma")
            variables[name + "_beta"] = variable_ctor(np.zeros((kout,), np.float32), name + "_beta")
    return variables


def setup(params):
    p = _parse_params(params)
    np, tf = _tf.import_tf("conv_alloc")
    is_tf2 = hasattr(tf, "function") and tf.__version__.split(".")[0] != "1"
    eager_now = _tf.executing_eagerly(tf)
    if p["allow_growth"]:
        _tf.set_memory_growth(tf)
    mode = p["mode"]
    if mode == "auto":
        mode = "function" if (is_tf2 and eager_now) else "graph"
    if mode in ("function", "eager") and not eager_now:
        raise RuntimeError("conv_alloc: mode={} needs TF 2.x executing eagerly (TF {}); use mode=graph".format(
            mode, tf.__version__))
    has_gpu = len(_tf.list_gpus(tf) or []) > 0
    device, device_name = _tf.pick_device("conv_alloc", tf, p["device"], has_gpu)
    shape = (p["batch"], p["height"], p["width"], p["in_channels"])
    state = {"tf": tf, "p": p, "mode": mode, "device": device, "device_name": device_name,
             "session": None, "extra": {}, "steps": 0, "loss": None, "fw_api": None}

    if mode == "graph":
        v1 = tf.compat.v1
        graph = tf.Graph()
        with graph.as_default(), graph.device(device_name):
            variables = _make_variables(tf, np, p, lambda init, name: v1.Variable(init, name=name))
            x = v1.random.uniform(shape, name="frames")
            target = v1.random.uniform(shape[:3] + (3,), name="target")
            out = _forward(tf, p, variables, x)
            loss = tf.reduce_mean(tf.square(out - target))
            train = v1.train.GradientDescentOptimizer(_LR).minimize(loss)
            init = v1.global_variables_initializer()
            if device == "gpu" and _tf.memory_info_getter(tf) is None:
                state["extra"] = _tf.contrib_memory_ops()
        config = v1.ConfigProto(allow_soft_placement=True)
        if p["allow_growth"]:
            config.gpu_options.allow_growth = True
        if device == "cpu":
            config.device_count["GPU"] = 0
        sess = v1.Session(graph=graph, config=config)
        sess.run(init)
        graph.finalize()
        state.update(session=sess, fetches=(train, loss), graph=graph)
    else:
        with tf.device(device_name):
            variables = _make_variables(tf, np, p, lambda init, name: tf.Variable(init, name=name))
            x = tf.random.uniform(shape, seed=1)
            target = tf.random.uniform(shape[:3] + (3,), seed=2)
        var_list = [variables[k] for k in sorted(variables)]

        def train_step(x, target):
            with tf.GradientTape() as tape:
                out = _forward(tf, p, variables, x)
                loss = tf.reduce_mean(tf.square(out - target))
            grads = tape.gradient(loss, var_list)
            for v, g in zip(var_list, grads):
                if g is not None:
                    v.assign_sub(_LR * g)
            return loss

        if mode == "function":
            train_step = tf.function(train_step)
        state.update(variables=variables, x=x, target=target, train_step=train_step)
    state["n_params"] = int(sum(int(np.prod(s)) for s in
                                [(3, 3, kin, kout) for _, kin, kout in _var_specs(p)]))
    state["activation_bytes"] = p["batch"] * p["height"] * p["width"] * p["channels"] * 4
    return state


def step(state):
    if state["mode"] == "graph":
        _, loss = state["session"].run(state["fetches"])
    else:
        with state["tf"].device(state["device_name"]):
            loss = state["train_step"](state["x"], state["target"])
        loss = float(loss.numpy())
    state["loss"] = float(loss)
    state["steps"] += 1


def fw_bytes(state):
    return _tf.fw_bytes(state)


def info(state):
    out = _tf.versions(state["tf"])
    out.update({
        "mode": state["mode"],
        "device": state["device"],
        "params": dict(state["p"]),
        "steps": state["steps"],
        "last_loss": state["loss"],
        "conv_weights": state["n_params"],
        "full_res_activation_bytes": state["activation_bytes"],
        "fw_bytes_api": state["fw_api"],
    })
    try:
        stats = _tf.memory_info(state["tf"], state["device"])
        if stats is not None:
            out["fw_peak_bytes"] = int(stats["peak"])
            out["fw_current_bytes"] = int(stats["current"])
    except Exception as exc:
        out["fw_peak_error"] = "{}: {}".format(type(exc).__name__, exc)
    peak = _tf.contrib_stat(state, "max_bytes_in_use")
    if peak is not None:
        out["fw_peak_bytes"] = peak
    return out


def teardown(state):
    _tf.close_session(state)
    for key in ("variables", "x", "target", "train_step"):
        state.pop(key, None)
