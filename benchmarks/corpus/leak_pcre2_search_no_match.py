"""pcre2 (the PCRE2 bindings, pcre2.py) leaks its match data block on every search that
finds nothing. `_match()` (src/pcre2/_cy.pyx) allocates a block with
`pcre2_match_data_create_from_pattern()` and runs `pcre2_match()`; on
`PCRE2_ERROR_NOMATCH` it returns None without `pcre2_match_data_free()`, and the block
is only ever freed by `PCRE2MatchData.__dealloc__`, whose object is made on a match
alone. So every `Pattern.search()`, `match()` or `fullmatch()` that does not match keeps
one block (the ovector and the header, sized by the pattern's capture count) for good.
Issue 27 ("Possible memory leak in Pattern.search() / match()", ~170 MB per million
non-matching searches, reproduced on 0.6.0 and 0.7.0) reported it; PR 28 ("fix: _match
memory leak by explicitly marking data as freed") frees it, released in 0.7.1.

The `re`-like API with `search()` and the leaking `_match()` came with 0.5.0 (PR 11,
"python-re-api"); 0.1.0 to 0.4.0 have another API (no `search()`; their `match()`
raises on no match), so the same scenario has no earlier release and no good release;
the case is bad and fixed only, as leak_mmh3_hash_from_buffer is, with 0.5.0 as the bad
release (a CPython 3.11 wheel, PCRE2 10.43).

The scenario searches a line of text that does not match a compiled pattern, as a log
or text filter does for most lines. The pattern has no capturing group (the issue's has
two: 160 B/call in 0.5.0, past this case's range), so what leaks per call is one block
with a single ovector pair, a 128-byte malloc chunk (0.7.0's PCRE2 10.47 block is 16
bytes larger: 144 B/call).

Truth: benchmarks/corpuskit/truth.py leak_pcre2_search_no_match --calls 20000 (20000
calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache
off).
It measured 128.0 B/call in 0.5.0 (the same in the second half, RSS +128 B/call) and 0.0
in 0.7.1; 0.7.0, the last release before the fix, measured 144.0.
"""

CASE = {
    "title": "pcre2: Pattern.search() keeps its match data block when nothing matches (<0.7.1)",
    "kind": "leak",
    "link": "https://github.com/grtetrault/pcre2.py/issues/27",
    "package": "pcre2",
    "versions": {"good": None, "bad": "0.5.0", "fixed": "0.7.1"},
    "extra": [],
    "params": {"pattern": "\\w+\\.(?:com|org|net)", "subject": "i swear i am not a pattern"},
    "truth": {
        "0.5.0": {"b_per_call": 128.02, "b_per_call_2nd_half": 128.0, "us_per_call": 2.67},
        "0.7.1": {"b_per_call": 0.02, "b_per_call_2nd_half": 0.01, "us_per_call": 1.41},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_pcre2_search_no_match --calls 20000: a plain "
        "loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call. 0.7.0 and the issue's "
        "two-group pattern by the same command with --releases"
    ),
    "batch": "49c",
}


def setup(params):
    import pcre2

    pattern = pcre2.compile(params.get("pattern", "\\w+\\.(?:com|org|net)"))
    return {"search": pattern.search,
            "subject": params.get("subject", "i swear i am not a pattern")}


def step(state):
    return state["search"](state["subject"])
