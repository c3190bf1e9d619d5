"""Control: the page cache: each call writes 1 MiB to the same temporary file and reads
it back. The kernel keeps the file's pages cached (outside the process); the process
itself keeps nothing. Truth "no leak".
"""

CASE = {
    "title": "control: page cache (1 MiB written and read back a call)",
    "kind": "control",
    "link": "https://docs.kernel.org/admin-guide/mm/concepts.html#page-cache",
    "package": None,
    "versions": {"good": "3.11"},
    "extra": [],
    "params": {},
    "truth": {
        "3.11": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 73.93},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_page_cache --warmup 1200: a plain loop "
        "in each release's venv, 1200 warm-up calls, then 3000 calls; glibc heap in "
        "use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import tempfile
    f = tempfile.TemporaryFile()  # noqa: SIM115 - open across steps, closed in teardown
    return {"f": f, "data": b"y" * (1 << 20)}


def step(state):
    f = state["f"]
    f.seek(0)
    f.write(state["data"])
    f.flush()
    f.seek(0)
    f.read()


def teardown(state):
    state["f"].close()
