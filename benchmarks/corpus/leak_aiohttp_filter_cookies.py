"""aiohttp's CookieJar.filter_cookies(), from 3.10.0 (path matching on the jar's keys)
to 3.12.2, reads `self._cookies[(domain, path)]` for every domain and path prefix of
the request URL; `_cookies` is a defaultdict, so each read of a new prefix stores an
empty SimpleCookie for good. A client requesting ever new paths (an id in the URL)
grows without end (the report: ~100 MB to ~5 GB over weeks). 3.9.5 filtered by
iterating the cookies; 3.12.3 skips absent keys (PR 11054).

The scenario is the maintainers' reproducer (a jar holding one cookie with Path=/, then
filter_cookies() on URLs of different paths), with a fresh path per call.

The empty entries also slow every later call (filter_cookies() and its expiry pass walk
the jar's keys): 3.10.0's median call went from 102 us over the first tenth of the
3000 calls to 1730 us over the last; 3.9.5 and 3.12.3 stay flat. The cost is
quadratic in the calls: psleak's default run (22,663 calls) took 482 s on 3.10.0 in
benchmarks/corpus.py --case leak_aiohttp_filter_cookies.

Truth: benchmarks/corpuskit/truth.py leak_aiohttp_filter_cookies (3000 calls after 200
warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache off).
"""

CASE = {
    "title": "aiohttp: CookieJar.filter_cookies() stores an empty entry per new path",
    "kind": "leak",
    "link": "https://github.com/aio-libs/aiohttp/issues/11052",
    "package": "aiohttp",
    "versions": {"good": "3.9.5", "bad": "3.10.0", "fixed": "3.12.3"},
    "extra": [],
    "params": {},
    "truth": {
        "3.9.5": {"b_per_call": 0.6, "b_per_call_2nd_half": 0.0, "us_per_call": 13.29},
        "3.10.0": {"b_per_call": 647.2, "b_per_call_2nd_half": 654.8, "us_per_call": 484.9},
        "3.12.3": {"b_per_call": 0.1, "b_per_call_2nd_half": 0.0, "us_per_call": 7.97},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_aiohttp_filter_cookies: a plain loop in "
        "each release's venv, 200 warm-up calls, then 3000 calls; glibc heap in use "
        "(mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
}


def setup(params):
    import asyncio

    import aiohttp
    from yarl import URL

    async def make_jar():   # the jar of 3.9 and 3.10 binds the running loop
        return aiohttp.CookieJar()

    loop = asyncio.new_event_loop()
    jar = loop.run_until_complete(make_jar())
    jar.update_cookies({"test_cookie": "value; Path=/"}, URL("http://example.com/"))
    return {"jar": jar, "url": URL, "loop": loop, "n": 0}


def step(state):
    state["n"] += 1
    url = state["url"](f"http://example.com/api/v1/users/{state['n']}")
    state["jar"].filter_cookies(url)
