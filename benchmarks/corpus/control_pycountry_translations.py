"""Control: pycountry's message catalogs loaded through gettext, which keeps every catalog
it has parsed (gettext._translations, one per .mo file) for good. The key set is finite:
the (domain, language) pairs pycountry ships for iso3166-1, iso3166-3, iso4217 and
iso15924 (389 in 24.6.1). Every third call opens the next catalog and translates a
country name (the calls between are cache hits): the heap rises at ~13 KiB/call on
average (5-35 KiB depending on the catalog) for ~1170 calls, then stays flat. Truth "no
leak": heap flat once every catalog is loaded (+0.1 B/call after a 1600-call warm-up).
With a 200-call warm-up: ~12.6 MiB more by call ~1170 (~13 KiB/call), then flat.
"""

CASE = {
    "title": "control: pycountry gettext catalogs over every shipped language",
    "kind": "control",
    "link": "https://github.com/pycountry/pycountry#locales",
    "package": "pycountry",
    "versions": {"good": "24.6.1"},
    "extra": [],
    "params": {},
    "truth": {
        "24.6.1": {"b_per_call": 0.13, "b_per_call_2nd_half": 0.03, "us_per_call": 34.09},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_pycountry_translations --warmup 1600 "
        "--calls 3000: a plain loop in the release's venv, 1600 warm-up calls (past the "
        "fill), then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time "
        "per call (a 2-core machine under load). The fill: truth.py "
        "control_pycountry_translations --warmup 200 --calls 3000 gave 4412.57 B/call "
        "(-0.01 B/call in the second half); its shape from heap samples every 25 calls "
        "of the same loop"
    ),
    "batch": "49",
}

DOMAINS = ("iso3166-1", "iso3166-3", "iso4217", "iso15924")


def setup(params):
    import gettext
    import os

    import pycountry
    d = pycountry.LOCALES_DIR
    pairs = sorted((dom, lang) for lang in os.listdir(d) for dom in DOMAINS
                   if os.path.exists(os.path.join(d, lang, "LC_MESSAGES", dom + ".mo")))
    name = pycountry.countries.get(alpha_2="DE").name
    return {"gettext": gettext, "dir": d, "pairs": pairs, "name": name, "n": 0}


def step(state):
    i = state["n"]
    state["n"] += 1
    pairs = state["pairs"]
    dom, lang = pairs[(i // 3) % len(pairs)]
    state["gettext"].translation(dom, state["dir"], languages=[lang]).gettext(state["name"])
