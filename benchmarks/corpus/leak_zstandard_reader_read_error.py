"""python-zstandard's C `ZstdCompressionReader.read(size)` leaks its output buffer when
reading from the source fails: it allocates the result bytes object of `size` bytes,
then returns NULL on `read_compressor_input()`'s -1 (the source's `read()` raised)
without releasing it, where the matching decompression reader does `Py_XDECREF(result)`.
Issue 297 ("Fix-propagation gaps", gap 1) reported it against 0.25.0, ~1.1 KB per read
error at its size; it is open, with no fixed release.

The missing release is in every release with a CPython 3.11 wheel (0.19.0 on), so the
case is the bad release only, the first that installs as a 3.11 wheel (0.19.0; 0.25.0,
the newest, leaks the same 112 B/call).

The scenario compresses from a source whose `read()` raises OSError (a dropped
connection) through a new `stream_reader` each call, reading 64 bytes: what leaks per
call is the 64-byte result, a 97-byte bytes object (112 with malloc's header).

Truth: benchmarks/corpuskit/truth.py leak_zstandard_reader_read_error --calls 20000
(20000 calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc,
tcache off).
It measured 112.2 B/call in 0.19.0 (112.0 in the second half, RSS +109 B/call;
tracemalloc +97.2 B/call); 0.25.0: 112.4.
"""

CASE = {
    "title": "zstandard: stream_reader.read() keeps its buffer when the source raises",
    "kind": "leak",
    "link": "https://github.com/indygreg/python-zstandard/issues/297",
    "package": "zstandard",
    "versions": {"good": None, "bad": "0.19.0", "fixed": None},
    "extra": [],
    "params": {"size": 64},
    "truth": {
        "0.19.0": {"b_per_call": 112.15, "b_per_call_2nd_half": 112.02, "us_per_call": 1.89},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_zstandard_reader_read_error --calls 20000: a "
        "plain loop in the release's venv, 200 warm-up calls, then 20000 calls; glibc "
        "heap in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call. tracemalloc: the same "
        "loop with tracemalloc's traced total before and after"
    ),
    "batch": "49b",
}


def setup(params):
    import zstandard

    class FailingSource:          # a stream whose read fails (a dropped connection)
        def read(self, size):
            raise OSError("connection reset")

    return {"cctx": zstandard.ZstdCompressor(), "src": FailingSource,
            "size": int(params.get("size", 64))}


def step(state):
    reader = state["cctx"].stream_reader(state["src"]())
    try:  # noqa: SIM105  (the caller retries later)
        reader.read(state["size"])
    except OSError:
        pass
