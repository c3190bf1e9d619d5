"""Control, slow creep: rich's per-character cell-width cache. `cell_len(text)` (in
rich/cells.py) sums `get_character_cell_size(character)` over every character of a
text of 512 characters or more (a shorter text goes through `cached_cell_len`, a cache
of whole strings, instead); `get_character_cell_size` is an
`functools.lru_cache(maxsize=4096)` keyed by the character. The scenario measures one
long log record (~3 KB: ASCII fields, then 16 CJK ideographs, the last of them new: a
window that moves one code point a call through U+4E00-U+9FFF, 20,992 ideographs)
every call, as a pager laying out a stream of records does: each call adds one entry
(the link and the new one-character str, a UCS-2 object outside the latin-1
singletons): ~160 B/call, ~185 B/call on average with the dict's growth, for 4,096
calls (742 KiB), then the least recently used character is dropped for each new one;
one more step of ~100 KiB near call 5,400 (the dict, churned by the evictions, is
rebuilt once at its next size: 845 KiB), then flat. Walking the record's characters
through the cache costs ~0.21 ms a call.

Truth "no leak": bounded (+0.2 B/call over 3000 calls after a 7000-call warm-up, 0.03
B/call in their second half). With a 200-call warm-up: 137 B/call averaged over 6000
calls, 81 B/call in their second half (the end of the fill and the dict's step).
"""

CASE = {
    "title": "control: rich get_character_cell_size LRU (4096 characters, ~160-185 B each)",
    "kind": "control",
    "link": "https://github.com/Textualize/rich/blob/v13.9.4/rich/cells.py",
    "package": "rich",
    "versions": {"good": "13.9.4"},
    "extra": ["markdown-it-py==3.0.0", "mdurl==0.1.2", "pygments==2.18.0"],
    "params": {},
    "truth": {
        "13.9.4": {"b_per_call": 0.2, "b_per_call_2nd_half": 0.03, "us_per_call": 211.76},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_rich_cell_width_lru --warmup 7000 "
        "--calls 3000: a plain loop in the release's venv, 7000 warm-up calls (past the "
        "fill and the dict's step), then 3000 calls; glibc heap in use (mallinfo2) after "
        "gc.collect() before, at the half and after, PYTHONMALLOC=malloc, tcache off; "
        "median time per call (a 2-core machine under load). The fill: truth.py "
        "control_rich_cell_width_lru --warmup 200 --calls 6000 gave 136.96 B/call "
        "(80.67 B/call in the second half); its shape from heap samples every 500 calls "
        "of the same loop"
    ),
    "batch": "49c",
}

IDEOGRAPHS = 0x9FFF - 0x4E00 + 1


def setup(params):
    from rich.cells import cell_len
    fields = " ".join(f"field{i:02d}=value-{i * 37 % 1000:03d}" for i in range(160))
    return {"cell_len": cell_len, "fields": fields, "n": 0}


def step(state):
    n = state["n"]
    state["n"] += 1
    name = "".join(chr(0x4E00 + (n - k) % IDEOGRAPHS) for k in range(15, -1, -1))
    return state["cell_len"](f"2024-05-01T12:00:00Z record={n:08d} {state['fields']} "
                             f"author={name}")
