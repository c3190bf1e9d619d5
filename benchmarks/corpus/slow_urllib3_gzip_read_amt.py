"""urllib3 2.0-2.5: reading a gzipped response in pieces is ~2.5x slower than in 1.26.

urllib3 2.0.0 made ``HTTPResponse.read(amt)`` return exactly ``amt`` decoded bytes: the
decompressed output goes into a ``BytesQueueBuffer`` and ``get(amt)`` hands it out,
slicing the buffered chunk with ``chunk[remaining:]``, which copies everything after
the piece on every read. A compressed read of a well-compressing body decodes to a
large chunk, so the copies grow with the square of the compression ratio. The report
(urllib3 2.5.0) measured a gzipped, unchunked download ~9x slower with
``decode_content=True`` than reading it raw and decompressing it after; the fix
(``memoryview`` slices, PR 3711) is in 2.6.0, which is faster than 1.26.

The step reads a 4 MB gzipped JSON-lines body (87,000 identical lines, 11.7 KB
compressed) from an in-memory ``HTTPResponse`` with ``decode_content=True`` in 8 KiB
pieces until it is empty, as a streaming client does; the body is built once in setup.

Truth, by hand: median CPU time per call (time.process_time) of 5 blocks of 2 calls
after one warm-up call; 1.26.15 (the last 1.26 before 2.0.0), 2.0.0 and 2.6.0 run in
turn, three rounds.
"""

CASE = {
    "title": "urllib3: HTTPResponse.read(amt) of a gzipped body ~2.5x slower in 2.0-2.5",
    "kind": "slowdown",
    "link": "https://github.com/urllib3/urllib3/issues/3710",
    "package": "urllib3",
    "versions": {"good": "1.26.15", "bad": "2.0.0", "fixed": "2.6.0"},
    "extra": [],
    "params": {"lines": 87000, "amt": 8192},
    "truth": {
        "1.26.15": {"us_per_call": 7604},
        "2.0.0": {"us_per_call": 18161},
        "2.6.0": {"us_per_call": 4439},
    },
    "measured": (
        "setup() once, step() once, then 5 blocks of 2 calls, median CPU us/call; three "
        "rounds, releases in turn: 1.26.15 7604/7257/8232, 2.0.0 18722/18161/16600, "
        "2.6.0 3825/4540/4439; bad/good 2.4x, fixed/good 0.58x (medians of the rounds). "
        "Beside, a 4 MB body of zero bytes (3.9 KB gzipped) read in 8 KiB pieces: "
        "1.26.20 13597, 2.0.0 38492, 2.5.0 36951, 2.6.0 9766 us/call; in 1 KiB pieces "
        "1.26.20 12427, 2.0.0 69003, 2.6.0 19227 (2.6.0's decompression-bomb limits "
        "cost more there)."
    ),
}


def setup(params):
    import gzip
    import io

    from urllib3.response import HTTPResponse

    line = b'{"id": 1, "name": "item", "tags": ["a", "b"]}\n'
    body = gzip.compress(line * int(params.get("lines", 87000)))

    def download():
        r = HTTPResponse(body=io.BytesIO(body), headers={"content-encoding": "gzip"},
                         preload_content=False, decode_content=True)
        amt = int(params.get("amt", 8192))
        while r.read(amt):
            pass

    return {"download": download}


def step(state):
    state["download"]()
