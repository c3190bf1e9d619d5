"""werkzeug 2.0.0-2.3.7: parsing a multipart upload whose file has one early line break
and then a long line is several times slower than in 1.0.1 or 2.3.8.

werkzeug 2.0.0 replaced the form parser with the sans-io ``MultipartDecoder``
(``werkzeug/sansio/multipart.py``). While no boundary has been seen, a chunk's data is
passed on only up to its last CR or LF (a boundary starts with a line break, so one may
be split across chunks): when a file has a line break near its start and none for a
long stretch after it, everything after that break stays in the decoder's buffer, each
new 64 KiB chunk is appended to it, and the whole of it is searched again. Reported as
CVE-2023-46136 / GHSA-hrfv-mqp8-q5rw ("Werkzeug DoS: High resource usage when parsing
multipart/form-data containing a large part with CR/LF character at the beginning");
fixed in 2.3.8 and 3.0.1 by PR 2801 (commit f2300208, "Fix: slow multipart parsing
for huge files with few CR/LF characters"): data further from the last line break
than a boundary is long is passed on at once. 1.0.1, the last release of the old
parser, does not have it.

The step is an ordinary upload, not an attack: ``parse_form_data`` of a
``multipart/form-data`` POST body (a text field and a file) whose file is a 512 KiB
minified JavaScript bundle, a one-line license banner and then the code on one line,
as minifiers write them; the file is read back whole. Without the banner's line break
every release parses it in ~0.5 ms.

Truth, by hand, outside harness: see "truth" and "measured" below.
"""

CASE = {
    "title": "werkzeug: multipart upload of a long-line file ~8x slower in 2.0.0-2.3.7",
    "kind": "slowdown",
    "link": "https://github.com/pallets/werkzeug/security/advisories/GHSA-hrfv-mqp8-q5rw",
    "package": "werkzeug",
    "versions": {"good": "1.0.1", "bad": "2.0.0", "fixed": "2.3.8"},
    "extra": [],
    "params": {"kib": 512},
    "truth": {
        "1.0.1": {"us_per_call": 1156.26},
        "2.0.0": {"us_per_call": 4583.08},
        "2.3.8": {"us_per_call": 490.32},
    },
    "measured": (
        "PYTHONPATH=. python3 benchmarks/corpuskit/truth.py "
        "slow_werkzeug_multipart_partial_boundary --calls 2000 --warmup 200 --jobs 1: a "
        "plain loop in each release's venv, median wall time per call: 1.0.1 1156.3, "
        "2.0.0 4583.1, 2.3.8 490.3 us/call (bad/good 3.96x, bad/fixed 9.35x), no heap "
        "growth (0.16-0.19 B/call). The same with --calls 1000 --warmup 50 --releases "
        "1.0.1,2.0.0,2.2.3,2.3.7,2.3.8,3.0.0,3.0.1: 612.5, 4460.7, 4403.0, 4478.8, 486.6, "
        "4558.1, 481.2 us/call (every 2.x-3.0.0 release slow, 2.3.8 and 3.0.1 not). CPU "
        "time, in one venv per release (python3 -m venv; pip install werkzeug==V): "
        "setup({'kib': 512}), step once, then the median of 7 blocks of "
        "timeit.Timer(step, timer=time.process_time).timeit(50) / 50; 6 rounds, 1.0.1, "
        "2.0.0, 2.3.8, the order flipped every other round (load average ~1): 1.0.1 "
        "1106.6/1093.5/1300.9/1093.7/1117.7/1673.7, 2.0.0 4438.5/4385.2/4519.5/4393.2/"
        "4832.3/4748.4, 2.3.8 473.8/469.2/498.0/494.1/478.3/540.5 us/call; medians "
        "1112.2, 4479.0, 486.2 (bad/good 4.0x, bad/fixed 9.2x). Without the banner's line "
        "break (a probe by hand): 2.0.0 467, 2.3.7 506, 2.3.8 529 us/call. 2.3.0 and "
        "2.3.2 cut the file short (a separate bug, fixed in 2.3.3) and are not used."
    ),
}

BOUNDARY = "----formdata-boundary-7MA4YWxkTrZu0gW"
ALPHABET = (b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
            b"(){};,.=+-*/<>!&|?:'\" ")


def setup(params):
    import io
    import random

    from werkzeug.formparser import parse_form_data

    rnd = random.Random(1)
    banner = b"/*! app.bundle.js v1.2.3 | MIT License */\n"
    code = bytes(rnd.choice(ALPHABET) for _ in range(int(params.get("kib", 512)) * 1024))
    body = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="comment"\r\n\r\n'
        f"new build\r\n"
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="app.bundle.min.js"\r\nContent-Type: application/javascript\r\n\r\n'
    ).encode() + banner + code + f"\r\n--{BOUNDARY}--\r\n".encode()
    return {"parse": parse_form_data, "io": io, "body": body,
            "size": len(banner) + len(code)}


def step(state):
    body = state["body"]
    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": state["io"].BytesIO(body),
    }
    _, form, files = state["parse"](environ)
    upload = files["file"]
    if len(upload.read()) != state["size"] or form["comment"] != "new build":
        raise RuntimeError("the upload did not parse whole")
    upload.close()
