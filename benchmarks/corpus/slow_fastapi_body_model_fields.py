"""FastAPI 0.113.0: every request with a Pydantic model body rebuilds the model's fields.

FastAPI 0.113.0 (form models) made ``request_body_to_args`` call
``get_model_fields(first_field.type_)`` on every request whose body is a single Pydantic
model, the most common endpoint shape; each call builds a ``ModelField`` (a pydantic
``TypeAdapter``) per field of the model. A user's serving CPU more than doubled from
0.112.4 to 0.113.0 (0.114.0 is as slow); 0.114.1 caches the fields (PR 12184).

The step is one POST of a JSON body to an endpoint ``async def create(body: Item)``
whose ``Item`` has 10 fields, sent to the ASGI app directly (a scope, a receive that hands the
body, a send that keeps the reply) on an event loop made in setup, so no HTTP client
or server stands between the call and the request parsing. (``async def``: a plain
``def`` endpoint runs in anyio's worker thread, which adds ~280 us a call and a thread
that stays, which psleak calls a leak after one call.)

Truth, by hand: median CPU time per call (time.process_time) of 7 blocks of 100 calls
after one warm-up call; 0.112.4, 0.113.0 and 0.114.1 (pydantic 2.8.2, starlette
0.38.6 in each) run in turn, three rounds.
"""

CASE = {
    "title": "FastAPI: a Pydantic body model's fields rebuilt on every request in 0.113-0.114.0",
    "kind": "slowdown",
    "link": "https://github.com/fastapi/fastapi/pull/12184",
    "package": "fastapi",
    "versions": {"good": "0.112.4", "bad": "0.113.0", "fixed": "0.114.1"},
    "extra": ["pydantic==2.8.2"],
    "params": {"fields": 10},
    "truth": {
        "0.112.4": {"us_per_call": 97.5},
        "0.113.0": {"us_per_call": 1972},
        "0.114.1": {"us_per_call": 96.9},
    },
    "measured": (
        "setup() once, step() once, then 7 blocks of 100 calls, median CPU us/call; "
        "three rounds, releases in turn: 0.112.4 97.5/116.6/91.6, 0.113.0 "
        "2032/1950/1972, 0.114.1 127.1/89.9/96.9; bad/good 20x, fixed/good 0.99x "
        "(medians of the rounds). 0.114.0 (one round beside): 2113 us/call, as slow as "
        "0.113.0. With a plain def endpoint (anyio's thread pool): 0.112.4 376, 0.113.0 "
        "2160, 0.114.1 410 (three rounds, 5.7x). Each venv has pydantic 2.8.2 and "
        "starlette 0.38.6."
    ),
}


def setup(params):
    import asyncio
    import json

    from fastapi import FastAPI
    from pydantic import create_model

    n = int(params.get("fields", 10))
    item = create_model("Item", **{f"f{i}": (str, ...) for i in range(n)})
    app = FastAPI()

    @app.post("/items")
    async def create(body: item):  # type: ignore[valid-type]
        return {"ok": True}

    payload = json.dumps({f"f{i}": f"v{i}" for i in range(n)}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/items", "raw_path": b"/items",
             "root_path": "", "query_string": b"", "server": ("test", 80),
             "client": ("test", 1234),
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(payload)).encode())]}

    async def receive():
        return {"type": "http.request", "body": payload, "more_body": False}

    sent = []

    async def send(message):
        sent.append(message)

    loop = asyncio.new_event_loop()

    def post():
        sent.clear()
        loop.run_until_complete(app(dict(scope), receive, send))
        assert sent[0]["status"] == 200, sent

    return {"post": post}


def step(state):
    state["post"]()
