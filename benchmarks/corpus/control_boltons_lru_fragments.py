"""Control, slow fill: boltons' LRU (`boltons.cacheutils.LRU(max_size=3000)`) behind
`@boltons.cacheutils.cached`, as a web app memoizing rendered page fragments. The
scenario renders the product card of a new product id every call (a 3,168-character
HTML table of 32 rows) and caches it: one entry a call (the string, the key and the
LRU's link, a 4-slot list in its doubly linked ring). The cache fills for 3,000 calls
(2,800 past harness's 200-call warm-up) at ~3.4 KiB/call, ~10.3 MiB in all, then drops
the least recently used card for each new one: flat, but for a step of ~0.3 MiB near
call 5,500 and a few KiB near 10,500-13,000 (the cache's dict, churned by the
evictions, rebuilt at its next size), then flat for good. Rendering a card: ~36 us a
call.

Truth "no leak": bounded (+0.06 B/call over 6000 calls after a 14000-call warm-up,
0.02 B/call in their second half). With a 200-call warm-up: 3.35 KiB/call averaged
over 3000 calls (the fill: 2,800 of them), 3.1 KiB/call in their second half, all of
it the fill.
"""

CASE = {
    "title": "control: boltons LRU of 3,000 rendered fragments (~3 KB each)",
    "kind": "control",
    "link": "https://boltons.readthedocs.io/en/latest/cacheutils.html",
    "package": "boltons",
    "versions": {"good": "25.0.0"},
    "extra": [],
    "params": {"max_size": 3000},
    "truth": {
        "25.0.0": {"b_per_call": 0.06, "b_per_call_2nd_half": 0.02, "us_per_call": 35.66},
    },
    "measured": (
        "PYTHONPATH=. python3 benchmarks/corpuskit/truth.py control_boltons_lru_fragments "
        "--warmup 14000 --calls 6000 --jobs 1: a plain loop in the release's venv, 14000 "
        "warm-up calls (past the fill and the dict's rebuilds), then 6000 calls; glibc "
        "heap in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call (a loaded 2-core host). "
        "With --warmup 8000 --calls 3000: 5.46 B/call (10.71 in the second half: the "
        "last few KiB of the dict's rebuilds). The fill: --warmup 200 --calls 3000 gave "
        "3354.08 B/call (3138.19 in the second half); its shape from heap samples every "
        "500 calls of the same loop over 20000 calls: +1716 KiB by call 500, 10493 KiB "
        "by 3000, 10541 by 4000, 10876 by 5500, 10899 by 7000-10000, 10948 by 13000, "
        "10946 at 20000"
    ),
}

ROW = ('<tr class="spec"><th scope="row">{k}</th><td data-sku="{sku}">{v}</td>'
       '</tr>\n')


def setup(params):
    from boltons.cacheutils import LRU, cached

    cache = LRU(max_size=int(params.get("max_size", 3000)))

    @cached(cache)
    def card(pid):
        sku = f"SKU-{pid:08d}"
        rows = "".join(ROW.format(k=f"attribute {i}", sku=sku, v=f"value {pid * 31 + i}")
                       for i in range(32))
        return (f'<article class="card" id="p{pid}"><h2>Product {pid}</h2>'
                f'<table>\n{rows}</table></article>')

    return {"card": card, "n": 0}


def step(state):
    state["card"](state["n"])
    state["n"] += 1
