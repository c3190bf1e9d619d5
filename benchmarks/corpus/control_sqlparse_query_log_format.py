"""Control, saw-tooth step time: sqlparse normalizing a fixed query log in order, each
query with a longer IN list than the one before. `sqlparse.format(sql,
keyword_case="upper", identifier_case="lower")` runs the pure-Python lexer (the rules'
regexes tried in turn at every position), the keyword and identifier filters over every
token, then joins the tokens back: the cost is linear in the tokens. Query i of the
2000 selects from a table with `WHERE id IN (...)` of 1 + i // 42 ids (1 to 48): ~0.45
ms for the shortest, ~1.7 ms for the longest on a loaded 2-core machine; after the
2000th the log starts again at the shortest, so the step time rises through the list
and drops back (a ~2.3 s cycle). (strip_comments=True, which groups the statement
first, tripled the cost: left out.)

The queries are built once in setup; sqlparse's lexer is one shared instance whose
rules are compiled once, and nothing is cached per query. Truth "no leak, no slowdown":
+0.1 B/call over 4000 calls after a 2000-call warm-up (0.02 in their second half); the
step time is the same cycle after cycle.
"""

CASE = {
    "title": "control: sqlparse.format over a 2000-query log with IN lists of 1 to 48 ids",
    "kind": "control",
    "link": "https://sqlparse.readthedocs.io/en/latest/api/",
    "package": "sqlparse",
    "versions": {"good": "0.5.3"},
    "extra": [],
    "params": {},
    "truth": {
        "0.5.3": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.02, "us_per_call": 1156.44},
    },
    "measured": (
        'benchmarks/corpuskit/truth.py control_sqlparse_query_log_format --calls 4000 '
        "--warmup 2000: a plain loop in the release's venv; glibc heap in use "
        '(mallinfo2) after gc.collect() before, at the half and after, '
        'PYTHONMALLOC=malloc, tcache off; median time per call, and over the first and '
        'the last tenth of the calls (a loaded 2-core machine). 2000 warm-up calls (1 '
        'cycle of 2000), then 4000 calls (2 cycles): 0.1 B/call, 0.02 in the second '
        'half; 1156.44 us/call median, 586.78 first tenth, 1723.57 last tenth. The rise '
        'inside one cycle: benchmarks/corpuskit/truth.py '
        'control_sqlparse_query_log_format --calls 1600 --warmup 2000 (0.8 of a cycle, '
        'from its start): 583.82 us/call over the first tenth, 1669.22 over the last '
        '(2.9x), 1201.19 median; 0.24 B/call, 0.06 in the second half'
    ),
    "batch": "49d",
}


def setup(params):
    import sqlparse
    n = int(params.get("queries", 2000))
    log = []
    for i in range(n):
        ids = ", ".join(str(i * 100 + j) for j in range(1 + i // 42))
        log.append(f"select o.Id, o.Total from Orders o -- batch {i}\n"
                   f"where o.Status = 'open' and o.Id in ({ids}) order by o.Id")
    return {"format": sqlparse.format, "log": log, "n": 0}


def step(state):
    log, n = state["log"], state["n"]
    state["n"] += 1
    return state["format"](log[n % len(log)], keyword_case="upper",
                           identifier_case="lower")
