"""Control, saw-tooth step time: PyYAML loading a fixed list of config documents in
order, each with more entries than the one before. `yaml.safe_load(text)` uses the
pure-Python SafeLoader (the C loader only runs when asked for by name): the reader,
scanner, parser, composer and constructor each walk every character, token, event and
node in Python, so a call costs in proportion to the document. Document i of the 2000
is a mapping of 1 + i // 64 entries (1 to 32, `host: port` lines under a header
comment): ~0.2 ms for the smallest, ~2 ms for the largest on a loaded 2-core machine;
after the 2000th the list starts again at the smallest, so the step time rises through
the list and drops back (a ~2.2 s cycle).

The documents are built once in setup; each call builds a new loader and drops it with
its result. Truth "no leak, no slowdown": +0.1 B/call over 4000 calls after a
2000-call warm-up (0.02 in their second half); the step time is the same cycle after
cycle.
"""

CASE = {
    "title": "control: yaml.safe_load over 2000 config documents of 1 to 32 entries",
    "kind": "control",
    "link": "https://pyyaml.org/wiki/PyYAMLDocumentation",
    "package": "pyyaml",
    "versions": {"good": "6.0.2"},
    "extra": [],
    "params": {},
    "truth": {
        "6.0.2": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.02, "us_per_call": 1125.75},
    },
    "measured": (
        'benchmarks/corpuskit/truth.py control_pyyaml_config_sizes --calls 4000 '
        "--warmup 2000: a plain loop in the release's venv; glibc heap in use "
        '(mallinfo2) after gc.collect() before, at the half and after, '
        'PYTHONMALLOC=malloc, tcache off; median time per call, and over the first and '
        'the last tenth of the calls (a loaded 2-core machine). 2000 warm-up calls (1 '
        'cycle of 2000), then 4000 calls (2 cycles): 0.1 B/call, 0.02 in the second '
        'half; 1125.75 us/call median, 308.42 first tenth, 1996.83 last tenth. The rise '
        'inside one cycle: benchmarks/corpuskit/truth.py control_pyyaml_config_sizes '
        '--calls 1600 --warmup 2000 (0.8 of a cycle, from its start): 187.6 us/call '
        'over the first tenth, 1668.96 over the last (8.9x), 931.36 median; 0.2 B/call, '
        '0.06 in the second half'
    ),
    "batch": "49d",
}


def setup(params):
    import yaml
    n = int(params.get("docs", 2000))
    docs = ["".join([f"# workers of shard {i}\n"]
                    + [f"w{j}.shard{i}.internal: {9000 + j}\n" for j in range(1 + i // 64)])
            for i in range(n)]
    return {"load": yaml.safe_load, "docs": docs, "n": 0}


def step(state):
    docs, n = state["docs"], state["n"]
    state["n"] += 1
    return state["load"](docs[n % len(docs)])
