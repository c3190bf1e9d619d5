"""Control: the sqlite3 connection's prepared-statement cache (cached_statements=1000, an
LRU of sqlite3 statements) reached through SQLAlchemy's pysqlite dialect (connect_args)
with SQLAlchemy's own compiled cache turned off (query_cache_size=0). Each call runs a
new SQL string with exec_driver_sql, so sqlite prepares and keeps it: the heap rises at
~2.6 KiB/call for 1000 calls (800 past harness's 200-call warm-up), then the LRU
finalizes the oldest statement for each new one: flat. Truth "no leak": heap flat once
full (+3.4 B/call after a 1400-call warm-up). With a 200-call warm-up: ~2 MiB more by
call 1000 (~2.5 KiB/call), then flat.
"""

CASE = {
    "title": "control: sqlite3 statement cache (cached_statements=1000) via SQLAlchemy",
    "kind": "control",
    "link": "https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#module-sqlalchemy.dialects.sqlite.pysqlite",
    "package": "sqlalchemy",
    "versions": {"good": "2.0.36"},
    "extra": ["typing_extensions==4.12.2", "greenlet==3.1.1"],
    "params": {},
    "truth": {
        "2.0.36": {"b_per_call": 3.35, "b_per_call_2nd_half": 5.26, "us_per_call": 48.21},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_sqlalchemy_sqlite_statements --warmup "
        "1400 --calls 3000: a plain loop in the release's venv, 1400 warm-up calls "
        "(past the fill), then 3000 calls; glibc heap in use (mallinfo2) after "
        "gc.collect() before, at the half and after, PYTHONMALLOC=malloc, tcache off; "
        "median time per call (a 2-core machine under load). The fill: truth.py "
        "control_sqlalchemy_sqlite_statements --warmup 200 --calls 3000 gave 702.76 "
        "B/call (10.65 B/call in the second half); its shape from heap samples every 25 "
        "calls of the same loop"
    ),
    "batch": "49",
}


def setup(params):
    import sqlalchemy as sa
    engine = sa.create_engine(
        "sqlite://", query_cache_size=0,
        connect_args={"cached_statements": int(params.get("size", 1000))})
    conn = engine.connect()
    conn.exec_driver_sql("create table t (id integer primary key, v integer)")
    conn.exec_driver_sql("insert into t values (1, 1), (2, 2), (3, 3)")
    return {"conn": conn, "n": 0}


def step(state):
    i = state["n"]
    state["n"] += 1
    state["conn"].exec_driver_sql(f"select id, v + {i} as v{i} from t where id < 3").all()
