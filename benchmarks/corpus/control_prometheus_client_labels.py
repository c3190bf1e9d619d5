"""Control: prometheus_client's labelled children, a registry filled on first use. A
Histogram with labels keeps one child per label set (`_metrics`, a dict keyed by the
label values), created by `.labels()` the first time the set is seen and kept for the
process's life, with its 15 buckets, sum and creation time. The scenario observes a
request for tenant `n % 1200` every call (each tenant's latency fixed, so its bucket is
the same every time): 1200 children, ~4.6 KiB each, created over the first 1200 calls
(1000 past harness's 200-call warm-up), then the same children are only incremented:
flat.

Truth "no leak": heap flat once the 1200 children exist (+0.12 B/call over 3000 calls
after a 1500-call warm-up, 0.04 B/call in their second half). With a 200-call warm-up:
~4.5 KiB/call to call 1200 (5.35 MiB), then flat: 1556 B/call averaged over 3000 calls,
0.03 B/call in their second half.
"""

CASE = {
    "title": "control: prometheus_client Histogram children per label set (1200 tenants)",
    "kind": "control",
    "link": "https://github.com/prometheus/client_python/blob/master/prometheus_client/metrics.py",
    "package": "prometheus-client",
    "versions": {"good": "0.21.1"},
    "extra": [],
    "params": {},
    "truth": {
        "0.21.1": {"b_per_call": 0.12, "b_per_call_2nd_half": 0.04, "us_per_call": 6.31},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_prometheus_client_labels --warmup 1500 "
        "--calls 3000: a plain loop in the release's venv, 1500 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_prometheus_client_labels --warmup 200 --calls 3000 gave 1556.17 B/call "
        "(0.03 B/call in the second half); its shape from heap samples every 100 calls "
        "of the same loop"
    ),
    "batch": "49b",
}


def setup(params):
    import prometheus_client

    registry = prometheus_client.CollectorRegistry()
    hist = prometheus_client.Histogram(
        "request_seconds", "request latency", ["tenant", "method"], registry=registry)
    return {"hist": hist, "n": 0, "tenants": int(params.get("tenants", 1200))}


def step(state):
    t = state["n"] % state["tenants"]
    state["n"] += 1
    state["hist"].labels(tenant=f"t{t:05d}", method="GET").observe((t % 13) / 10)
