"""Control: parsel's compiled-XPath cache. `Selector.xpath(query)` gets its evaluator
from `_compile_xpath(query, namespaces, smart_strings)` (in parsel/selector.py), an
`functools.lru_cache(maxsize=2048)` of lxml `etree.XPath` objects (libxml2's compiled
expression and lxml's wrapper; queries naming an EXSLT namespace skip it). The
scenario runs a new query every call on one parsed page (a row id that changes, as a
scraper building per-record queries from its input does): each compiled XPath is ~8
KiB, so the cache fills at ~8.2 KiB/call for 2,048 calls (16 MiB), then drops the
least recently used query for each new one; ~0.55 MiB more by call ~4,000 (the dict,
churned by the evictions, rebuilt once at its next size, and libxml2's allocations
settling: 50 B/call over calls 3,000-4,000, 8 B/call over 4,000-5,000, nothing past
~7,000). Compiling a query and running it on the page: ~65-70 us a call. lxml is
pinned to 6.1.3: under lxml 5.3.0 (libxml2 2.12) compiling a new XPath alone kept
~5-10 B more per call past the fill, the dependency's creep, not parsel's cache.

Truth "no leak": bounded (+0.62 B/call over 3000 calls after a 7000-call warm-up, 0.99
B/call in their second half; +0.14 and -0.35 B/call over 6000 calls after the same
warm-up). With a 200-call warm-up: 5102 B/call averaged over 3000 calls, 1984 B/call
in their second half (the fill ends at call 2,048).
"""

CASE = {
    "title": "control: parsel compiled-XPath LRU cache (2048 queries, ~8 KiB each)",
    "kind": "control",
    "link": "https://github.com/scrapy/parsel/blob/master/parsel/selector.py",
    "package": "parsel",
    "versions": {"good": "1.12.1"},
    "extra": ["cssselect==1.2.0", "jmespath==1.0.1", "lxml==6.1.3", "w3lib==2.2.1"],
    "params": {},
    "truth": {
        "1.12.1": {"b_per_call": 0.62, "b_per_call_2nd_half": 0.99, "us_per_call": 67.61},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_parsel_xpath_compile_lru --warmup 7000 "
        "--calls 3000: a plain loop in the release's venv, 7000 warm-up calls (past the "
        "fill and its settling), then 3000 calls; glibc heap in use (mallinfo2) after "
        "gc.collect() before, at the half and after, PYTHONMALLOC=malloc, tcache off; "
        "median time per call (a 2-core machine under load). --calls 6000 after the same "
        "warm-up gave 0.14 B/call (-0.35 B/call in the second half). The fill: truth.py "
        "control_parsel_xpath_compile_lru --warmup 200 --calls 3000 gave 5102.09 B/call "
        "(1983.69 B/call in the second half); its shape from heap samples every 1000 "
        "calls of the same loop"
    ),
    "batch": "49c",
}


def setup(params):
    from parsel import Selector
    rows = "".join(f'<tr id="r{i}" data-sku="{1000 + i}"><td class="name">item {i}</td>'
                   f'<td class="price">{i * 3 % 97}.99</td><td><a href="/p/{i}">view</a>'
                   f'</td></tr>' for i in range(40))
    page = Selector(text=f"<html><body><table id='catalog'>{rows}</table></body></html>")
    return {"page": page, "n": 0}


def step(state):
    n = state["n"]
    state["n"] += 1
    return state["page"].xpath(
        f"//table[@id='catalog']/tr[@id='r{n % 40}' or @data-sku='{100000 + n}']"
        f"/td[@class='price']/text()").getall()
