"""Control, saw-tooth step time: Python-Markdown rendering a fixed list of release-notes
documents in order, each longer than the one before. One `markdown.Markdown` instance is
reused, `md.reset().convert(text)` per call (the pattern the library's docs give for
converting many documents): the block parser splits the text into blocks, the inline
processors run their regexes over every line, the tree is serialized to HTML. The cost
is linear in the document: document i of the 1800 has 1 + i // 150 bullet lines (1 to
12, each with emphasis, inline code and a link), ~0.3 ms for the shortest and ~2 ms for
the longest on a loaded 2-core machine; after the 1800th the list starts again at the
shortest, so the step time rises through the list and drops back (a ~2.3 s cycle).

reset() drops what the previous conversion kept (the HTML stash, the references); the
documents are built once in setup. The heap settles ~5 KiB higher over the first ~4
cycles (small strings from `finditer` in the inline processor, a bounded pool, most
likely attribute names that CPython 3.11's type method cache holds until their slots
are reused), then stays flat. Truth "no leak, no slowdown": +0.49 B/call over 3600
calls after a 5400-call warm-up (0.2 in their second half); the step time is the same
cycle after cycle, rising ~4x from the first to the last tenth of the list.
"""

CASE = {
    "title": "control: markdown Markdown.convert over 1800 release notes of growing size",
    "kind": "control",
    "link": "https://python-markdown.github.io/reference/#Markdown",
    "package": "markdown",
    "versions": {"good": "3.7"},
    "extra": [],
    "params": {},
    "truth": {
        "3.7": {"b_per_call": 0.49, "b_per_call_2nd_half": 0.2, "us_per_call": 1286.63},
    },
    "measured": (
        'benchmarks/corpuskit/truth.py control_markdown_release_notes_sizes --calls '
        "3600 --warmup 5400: a plain loop in the release's venv; glibc heap in use "
        '(mallinfo2) after gc.collect() before, at the half and after, '
        'PYTHONMALLOC=malloc, tcache off; median time per call, and over the first and '
        'the last tenth of the calls (a loaded 2-core machine). 5400 warm-up calls (3 '
        'cycles of 1800), then 3600 calls (2 cycles): 0.49 B/call, 0.2 in the second '
        'half; 1286.63 us/call median, 489.99 first tenth, 2023.47 last tenth. The rise '
        'inside one cycle: benchmarks/corpuskit/truth.py '
        'control_markdown_release_notes_sizes --calls 1440 --warmup 1800 (0.8 of a '
        'cycle, from its start): 324.39 us/call over the first tenth, 1784.82 over the '
        'last (5.5x), 1120.3 median; 0.92 B/call, 17.16 in the second half'
    ),
    "batch": "49d",
}


def setup(params):
    import markdown
    n = int(params.get("docs", 1800))
    docs = []
    for i in range(n):
        lines = [f"# Release 1.{i}", "", f"Changes since 1.{i - 1 if i else 0}:", ""]
        lines += [f"- fix #{i * 20 + j}: retry *flaky* `job{j}` in "
                  f"[run {i}-{j}](https://ci.example.org/runs/{i}/{j})"
                  for j in range(1 + i // 150)]
        docs.append("\n".join(lines) + "\n")
    return {"md": markdown.Markdown(extensions=["tables"]), "docs": docs, "n": 0}


def step(state):
    docs, n = state["docs"], state["n"]
    state["n"] += 1
    return state["md"].reset().convert(docs[n % len(docs)])
