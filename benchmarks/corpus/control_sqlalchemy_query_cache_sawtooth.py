"""Control, saw-tooth: SQLAlchemy's compiled-statement cache (the Engine's
query_cache_size, an sqlalchemy.util.LRUCache with threshold 0.5): a call executes a
SELECT whose structure is new (a fresh label), so its compiled form is cached. The cache
grows to 600 entries (~14.5 KiB each with the SQLite statement behind it), then drops
back to its 400 most recently used at once. A new statement every second call (the call
between runs it again, a cache hit): the heap climbs for 1200 calls (1000 past harness's
200-call warm-up) at ~7.4 KiB/call, then saw-tooths (400 calls up, one ~2.8 MiB drop)
within a bound. Truth "no leak": bounded (+45 B/call over 3200 calls, 8 whole 400-call
periods, after a 2400-call warm-up: phase noise against a 2.8 MiB tooth). With a
200-call warm-up: ~7.4 KiB/call up to call ~1200 (~6 MiB), then the saw-tooth: 2.5
KiB/call averaged over 3000 calls, 1.5 KiB/call in their second half (it ends on a
rising edge).
"""

CASE = {
    "title": "control: SQLAlchemy compiled cache (query_cache_size=400) burst eviction",
    "kind": "control",
    "link": "https://docs.sqlalchemy.org/en/20/core/connections.html#sql-compilation-caching",
    "package": "sqlalchemy",
    "versions": {"good": "2.0.36"},
    "extra": ["typing_extensions==4.12.2", "greenlet==3.1.1"],
    "params": {},
    "truth": {
        "2.0.36": {"b_per_call": 45.13, "b_per_call_2nd_half": 53.08, "us_per_call": 547.71},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_sqlalchemy_query_cache_sawtooth --warmup "
        "2400 --calls 3200: a plain loop in the release's venv, 2400 warm-up calls "
        "(past the fill), then 3200 calls; glibc heap in use (mallinfo2) after "
        "gc.collect() before, at the half and after, PYTHONMALLOC=malloc, tcache off; "
        "median time per call (a 2-core machine under load). The fill: truth.py "
        "control_sqlalchemy_query_cache_sawtooth --warmup 200 --calls 3000 gave 2523.43 "
        "B/call (1500.16 B/call in the second half); its shape from heap samples every "
        "25 calls of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import sqlalchemy as sa
    engine = sa.create_engine("sqlite://", query_cache_size=int(params.get("size", 400)))
    md = sa.MetaData()
    t = sa.Table("t", md, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("v", sa.Integer))
    conn = engine.connect()
    md.create_all(conn)
    conn.execute(t.insert(), [{"id": i, "v": i} for i in range(4)])
    return {"sa": sa, "t": t, "conn": conn, "n": 0}


def step(state):
    k = state["n"] // 2         # a new statement every second call
    state["n"] += 1
    sa, t = state["sa"], state["t"]
    stmt = sa.select(t.c.id, (t.c.v + 1).label(f"v{k}")).where(t.c.id < 3)
    state["conn"].execute(stmt).all()
