"""tfdata_pipeline: pull one batch per step from a tf.data input pipeline over TFRecords.

Reproduces seed reports 001 and 002:
- 001 (shared/seeds/001_4f366c2694f9f634.txt): RSS kept growing with
      tf.data.Dataset.list_files(files, True)
          .interleave(tf.data.TFRecordDataset, len(files), 1, 4)
          .shuffle(batch_size * 500).repeat().map(_parser)
  (parse_single_example + decode_image), also with
  TFRecordDataset(files, buffer_size=100, num_parallel_reads=4) and with two such datasets
  mixed by tf.data.experimental.sample_from_datasets; switching to Dataset.range indexing
  into in-memory data held RSS flat at ~6.1 GB.
- 002 (shared/seeds/002_047cc5fd13ca9886.txt): tf.py_function maps with a high
  num_parallel_calls (and cache()) buffer Python objects, which looks like a leak.

setup() writes a small TFRecord set into a temporary directory (``files`` files x
``records`` records; each a tf.train.Example with a JPEG-encoded (or raw) random image,
an int64 label and a serialized bbox tensor, as in the seed), builds the pipeline and an
iterator; step() pulls one batch. teardown() deletes the directory.

Runs in TF 2.x eager (iterator = iter(dataset), step = next(it)) and in TF1-style graph
mode (tf.compat.v1.data.make_one_shot_iterator + Session.run, in an explicit tf.Graph),
which is what TF 1.15 uses and what ``mode=graph`` forces on TF 2.x.

Params (all optional):
  pipeline        interleave | parallel_reads | sample_from | range_index | py_function
                  (default interleave)
                  interleave:     list_files -> interleave(TFRecordDataset, cycle_length=#files,
                                  block_length=1, num_parallel_calls=interleave_calls)
                                  -> shuffle -> repeat -> map(parse+decode) -> batch
                  parallel_reads: TFRecordDataset(files, buffer_size=100,
                                  num_parallel_reads=parallel_reads) -> shuffle -> repeat
                                  -> map(parse+decode) -> batch
                  sample_from:    two interleave datasets (first/second half of the files)
                                  mixed by sample_from_datasets([pos, neg], [0.8, 0.2])
                                  -> map(parse+decode) -> batch (the seed's full pipeline)
                  range_index:    Dataset.range(n) -> shuffle -> repeat -> map(tf.gather
                                  into an in-memory uint8 array of the decoded images) -> batch
                  py_function:    Dataset.range(n) -> shuffle -> repeat -> map(tf.py_function
                                  that copies an image from an in-memory numpy array and
                                  allocates py_alloc_kib of scratch, num_parallel_calls=
                                  parallel_calls) -> batch
  batch           int >= 1, default 16
  shuffle_buffer  int >= 0, default 256 (0 = no shuffle)
  parallel_calls  int >= 1 or -1 (AUTOTUNE), default 4: num_parallel_calls of the
                  py_function map (and of the parse map when map_parallel is true)
  map_parallel    true | false, default false: parallel parse map for the TFRecord pipelines
  parallel_reads  int >= 1, default 4 (parallel_reads pipeline)
  interleave_calls int >= 1 or -1 (AUTOTUNE), default 4 (interleave / sample_from)
  prefetch        int >= 0 or -1 (AUTOTUNE), default 0 (no prefetch)
  cache           true | false, default false: cache() after the map (the pipeline becomes
                  source -> map -> cache -> shuffle -> repeat -> batch)
  encoding        jpeg | raw, default jpeg
  image           int >= 8, default 64 (square image side; 3 channels)
  files           int >= 2, default 8
  records         int >= 1, default 64 (records per file)
  py_alloc_kib    int >= 0, default 256 (py_function pipeline: scratch numpy allocation
                  per element)
  mode            auto | eager | graph, default auto (eager when TF executes eagerly)
"""

import os
import shutil
import tempfile

import _params  # shared param parsing (stdlib only), next to this file
import _tf  # shared TensorFlow plumbing (stdlib only), next to this file

_AUTOTUNE = _params.AUTOTUNE  # -1

_PARAM_SPEC = {
    "pipeline": ("interleave", ("interleave", "parallel_reads", "sample_from", "range_index",
                                "py_function")),
    "batch": (16, ("int_strict", 1)),
    "shuffle_buffer": (256, ("int_strict", 0)),
    "parallel_calls": (4, ("int_or_autotune", 1)),
    "map_parallel": (False, "bool"),
    "parallel_reads": (4, ("int_strict", 1)),
    "interleave_calls": (4, ("int_or_autotune", 1)),
    "prefetch": (0, ("int_or_autotune", 0)),
    "cache": (False, "bool"),
    "encoding": ("jpeg", ("jpeg", "raw")),
    "image": (64, ("int_strict", 8)),
    "files": (8, ("int_strict", 2)),
    "records": (64, ("int_strict", 1)),
    "py_alloc_kib": (256, ("int_strict", 0)),
    "mode": ("auto", ("auto", "eager", "graph")),
}


def _parse_params(params):
    return _params.parse("tfdata_pipeline", params, _PARAM_SPEC)


def _tune(tf, n):
    if n == _AUTOTUNE:
        return getattr(tf.data, "AUTOTUNE", None) or tf.data.experimental.AUTOTUNE
    return n


def _write_records(tf, np, p, directory):
    """Write p['files'] TFRecord files; return (paths, decoded images array, labels)."""
    v1 = tf.compat.v1
    side = p["image"]
    n_total = p["files"] * p["records"]
    rng = np.random.RandomState(1234)
    # smooth-ish random images so JPEG sizes are realistic (not pure noise)
    base = rng.randint(0, 256, size=(n_total, side // 8 + 1, side // 8 + 1, 3)).astype(np.uint8)
    images = np.repeat(np.repeat(base, 8, axis=1), 8, axis=2)[:, :side, :side, :].copy()
    noise = rng.randint(0, 16, size=images.shape).astype(np.uint8)
    images = (images // 2 + noise).astype(np.uint8)
    labels = rng.randint(0, 2, size=(n_total,)).astype(np.int64)

    encoded = []
    bboxes = []
    graph = tf.Graph()
    with graph.as_default():
        ph = v1.placeholder(tf.uint8, shape=(side, side, 3))
        enc = tf.io.encode_jpeg(ph, quality=90)
        bph = v1.placeholder(tf.float32, shape=(None, 4))
        ser = tf.io.serialize_tensor(bph)
        with v1.Session(graph=graph) as sess:
            for i in range(n_total):
                if p["encoding"] == "jpeg":
                    encoded.append(sess.run(enc, {ph: images[i]}))
                else:
                    encoded.append(images[i].tobytes())
                box = rng.random_sample((1 + i % 3, 4)).astype(np.float32)
                bboxes.append(sess.run(ser, {bph: box}))
    if p["encoding"] == "jpeg":
        # what the pipeline will really see after decoding (JPEG is lossy)
        graph = tf.Graph()
        with graph.as_default():
            sph = v1.placeholder(tf.string, shape=())
            dec = tf.io.decode_jpeg(sph, channels=3)
            with v1.Session(graph=graph) as sess:
                images = np.stack([sess.run(dec, {sph: e}) for e in encoded])

    paths = []
    k = 0
    for f in range(p["files"]):
        path = os.path.join(directory, "part-{:03d}.tfrecord".format(f))
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(p["records"]):
                feature = {
                    "img_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded[k]])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(labels[k])])),
                    "bbox": tf.train.Feature(bytes_list=tf.train.BytesList(value=[bboxes[k]])),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
                k += 1
        paths.append(path)
    return paths, images, labels


def _build_dataset(tf, np, p, paths, images, labels):
    side = p["image"]
    parallel = _tune(tf, p["parallel_calls"])

    def parse(stream):
        example = tf.io.parse_single_example(stream, {
            "img_raw": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64),
            "bbox": tf.io.FixedLenFeature([], tf.string),
        })
        if p["encoding"] == "jpeg":
            img = tf.image.decode_image(example["img_raw"], channels=3, expand_animations=False) \
                if _decode_image_has_expand(tf) else tf.io.decode_jpeg(example["img_raw"], channels=3)
        else:
            img = tf.reshape(tf.io.decode_raw(example["img_raw"], tf.uint8), (side, side, 3))
        img.set_shape((side, side, 3))
        bbox = tf.io.parse_tensor(example["bbox"], tf.float32)
        n_boxes = tf.shape(bbox)[0]
        return img, example["label"], n_boxes

    def tfrecord_map(ds):
        if p["map_parallel"]:
            return ds.map(parse, num_parallel_calls=parallel)
        return ds.map(parse)

    def shuffle_repeat(ds):
        if p["shuffle_buffer"] > 0:
            ds = ds.shuffle(p["shuffle_buffer"], seed=7)
        return ds.repeat()

    def interleaved(files):
        ds = tf.data.Dataset.list_files(files, shuffle=True, seed=3)
        return ds.interleave(tf.data.TFRecordDataset, cycle_length=len(files), block_length=1,
                             num_parallel_calls=_tune(tf, p["interleave_calls"]))

    def finish(source, mapper):
        # seed order: source -> shuffle -> repeat -> map; with cache: source -> map -> cache -> ...
        if p["cache"]:
            return shuffle_repeat(mapper(source).cache())
        return mapper(shuffle_repeat(source))

    pipeline = p["pipeline"]
    if pipeline == "interleave":
        ds = finish(interleaved(paths), tfrecord_map)
    elif pipeline == "parallel_reads":
        source = tf.data.TFRecordDataset(paths, buffer_size=100, num_parallel_reads=p["parallel_reads"])
        ds = finish(source, tfrecord_map)
    elif pipeline == "sample_from":
        half = len(paths) // 2
        parts = []
        for files in (paths[:half], paths[half:]):
            src = interleaved(files)
            if p["cache"]:
                src = src.cache()
            parts.append(shuffle_repeat(src))
        sampler = getattr(tf.data.Dataset, "sample_from_datasets", None)
        if sampler is None:
            sampler = tf.data.experimental.sample_from_datasets
        ds = tfrecord_map(sampler(parts, [0.8, 0.2], seed=5))
    elif pipeline == "range_index":
        table = tf.constant(images)
        label_table = tf.constant(labels)

        def gather(i):
            return tf.gather(table, i), tf.gather(label_table, i), tf.constant(1, tf.int32)

        ds = finish(tf.data.Dataset.range(len(images)), lambda d: d.map(gather))
    else:  # py_function
        scratch_elems = p["py_alloc_kib"] * 1024 // 8

        def load(i):
            i = int(i.numpy()) if hasattr(i, "numpy") else int(i)
            img = images[i].copy()
            if scratch_elems:
                scratch = np.random.random_sample(scratch_elems)  # float64 scratch, as seed 002
                img[0, 0, 0] = int(scratch[0] * 255)
            return img, labels[i]

        def wrapped(i):
            img, label = tf.py_function(load, [i], [tf.uint8, tf.int64])
            img.set_shape((side, side, 3))
            label.set_shape(())
            return img, label, tf.constant(1, tf.int32)

        ds = finish(tf.data.Dataset.range(len(images)),
                    lambda d: d.map(wrapped, num_parallel_calls=parallel))
    ds = ds.batch(p["batch"])
    if p["prefetch"] != 0:
        ds = ds.prefetch(_tune(tf, p["prefetch"]))
    return ds


def _decode_image_has_expand(tf):
    try:
        import inspect
        return "expand_animations" in inspect.signature(tf.image.decode_image).parameters
    except Exception:
        return False


def setup(params):
    p = _parse_params(params)
    np, tf = _tf.import_tf("tfdata_pipeline")
    eager_now = _tf.executing_eagerly(tf)
    mode = p["mode"]
    if mode == "auto":
        mode = "eager" if eager_now else "graph"
    if mode == "eager" and not eager_now:
        raise RuntimeError("tfdata_pipeline: mode=eager but TF {} is not executing eagerly "
                           "(use mode=graph or auto)".format(tf.__version__))
    directory = tempfile.mkdtemp(prefix="harness-tfdata-")
    state = {"tf": tf, "p": p, "mode": mode, "dir": directory, "session": None, "it": None,
             "steps": 0, "last_batch": None}
    try:
        paths, images, labels = _write_records(tf, np, p, directory)
        state["record_bytes"] = sum(os.path.getsize(x) for x in paths)
        if mode == "eager":
            ds = _build_dataset(tf, np, p, paths, images, labels)
            state["it"] = iter(ds)
        else:
            v1 = tf.compat.v1
            graph = tf.Graph()
            with graph.as_default():
                ds = _build_dataset(tf, np, p, paths, images, labels)
                it = v1.data.make_one_shot_iterator(ds)
                state["next"] = it.get_next()
            state["graph"] = graph
            state["session"] = v1.Session(graph=graph)
            graph.finalize()
    except Exception:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return state


def step(state):
    if state["mode"] == "eager":
        batch = next(state["it"])
    else:
        batch = state["session"].run(state["next"])
    state["steps"] += 1
    state["last_batch"] = int(batch[0].shape[0])


def fw_bytes(state):
    if state.get("fw_api") == "none":
        return None
    try:
        stats = _tf.memory_info(state["tf"], "cpu")
        if stats is not None:
            return int(stats["current"])
    except Exception:
        pass
    state["fw_api"] = "none"
    return None


def info(state):
    tf = state["tf"]
    out = _tf.versions(tf, nvidia=False)
    out.update({
        "mode": state["mode"],
        "params": dict(state["p"]),
        "steps": state["steps"],
        "last_batch_size": state["last_batch"],
        "record_bytes": state.get("record_bytes"),
    })
    try:
        stats = _tf.memory_info(tf, "cpu")
        if stats is not None:
            out["fw_peak_bytes"] = int(stats["peak"])
    except Exception:
        pass
    return out


def teardown(state):
    state["it"] = None
    _tf.close_session(state)
    shutil.rmtree(state["dir"], ignore_errors=True)
