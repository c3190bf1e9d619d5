"""pycurl leaks the message of every `pycurl.error` that a failed transfer raises.
`create_error_object()` (src/util.c) makes the message string `s` from the handle's
error buffer (or, since 7.45.3, `curl_easy_strerror()` of the code) and builds the
exception's arguments with `Py_BuildValue("(iO)", code, s)`; the "O" takes a reference
of its own, and `s` is released only when `Py_BuildValue()` fails, so every failed
`perform()` keeps its message. PR 1023 ("Fix some reference leaks", in the 7.47.0
changelog as "Fix some reference leaks (patch by Jorge Rocamora)") adds the
`Py_DECREF(s)`, with two other leaks it names (issues 1020 and 1025), first released in
7.47.0.

The leaking code dates from 2018 (commit 5ce53871, "Replace invalid bytes in strings
surfaced via pycurl.error exceptions"), so every pycurl with a CPython 3.11 wheel
before 7.47.0 has it and there is no good release on 3.11; the case is bad and fixed
only, as leak_mmh3_hash_from_buffer is, with the bad release the first that installs as
a 3.11 wheel (7.45.3; 7.45.2 and older have no CPython 3.11 wheel). 7.46.0 leaks too.

The scenario is a client handed a link with a mistyped scheme: a `Curl` handle set up
once with `htp://example.invalid/report.csv` and a BytesIO to write into; each call runs
`perform()`, which fails at once with error 1 (unsupported protocol, no network touched),
and the caller catches the `pycurl.error` and reports its code. What leaks per call is
the message: in 7.45.3 (libcurl 7.61.1) 'Protocol "htp" not supported or disabled in
libcurl', a 100-byte str (112 with malloc's header); 7.46.0's libcurl 8.19 says
'Protocol "htp" not supported', 77 bytes (96). (`perform_rb()` on a failed transfer
also kept its BytesIO before 7.46.0, a separate leak fixed there; the scenario calls
`perform()` to measure this one alone.)

Truth: benchmarks/corpuskit/truth.py leak_pycurl_perform_error_message --calls 20000
(20000 calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc,
tcache off).
It measured 112.0 B/call in 7.45.3 (the same in the second half, RSS +112 B/call) and
0.0 in 7.47.0; 7.46.0 measured 96.1 (96.0 in the second half).
"""

CASE = {
    "title": "pycurl: every failed perform() keeps its error message string (<7.47.0)",
    "kind": "leak",
    "link": "https://github.com/pycurl/pycurl/pull/1023",
    "package": "pycurl",
    "versions": {"good": None, "bad": "7.45.3", "fixed": "7.47.0"},
    "extra": [],
    "params": {"url": "htp://example.invalid/report.csv"},
    "truth": {
        "7.45.3": {"b_per_call": 112.02, "b_per_call_2nd_half": 112.01, "us_per_call": 8.14},
        "7.47.0": {"b_per_call": 0.02, "b_per_call_2nd_half": 0.0, "us_per_call": 12.63},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_pycurl_perform_error_message --calls 20000: a "
        "plain loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc "
        "heap in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call. 7.46.0 by the same "
        "command with --releases 7.45.3,7.46.0,7.47.0"
    ),
    "batch": "49c",
}


def setup(params):
    import io

    import pycurl

    curl = pycurl.Curl()
    curl.setopt(pycurl.URL, params.get("url", "htp://example.invalid/report.csv"))
    curl.setopt(pycurl.WRITEDATA, io.BytesIO())
    return {"curl": curl, "error": pycurl.error}


def step(state):
    try:  # a transfer that fails and is reported
        state["curl"].perform()
    except state["error"] as exc:
        return exc.args[0]
    return 0
