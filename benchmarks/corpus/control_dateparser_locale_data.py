"""Control, per-key data: dateparser's locale data, loaded on first use. The first
parse in a locale has `LocaleDataLoader` (dateparser/languages/loader.py) import the
language's translation data (`dateparser.data.date_translation_data.<lang>`) and keep
a `Locale` built from a deep copy of it in the class-level `_loaded_locales` (the
language's in `_loaded_languages`) for good, and `Dictionary` (languages/dictionary.py)
keeps the locale's compiled word-splitting regexes in its class-level caches. The set
is finite: 504 locales (205 languages and 299 regional variants). The scenario parses
a date in the next locale every call, cycling through all of them in order, as a
service parsing dates from users all over the world meets them: ~93 KiB/call (46
MiB in all) over the first 504 calls, then flat but for a settling over the next few
cycles (+69 B/call over the second cycle, +17 and +34 over the next two) and a wander
of about +-10 KiB after it (steps of 3-6 KiB up or down in the first half of a cycle:
regex's pattern cache, 500 patterns, which tosses a random fifth of its entries when
full, churning). ~11 ms a call while a locale is first loaded, ~0.3-1 ms after.

Truth "no leak": bounded (+3.52 B/call over 6048 calls, 12 whole cycles, after a
3024-call warm-up, 0.01 B/call in their second half: ~21 KiB of the wander fell in the
first half; +2.11 B/call, -0.7 in the second half, over 6060 calls after a 3030-call
warm-up). With a 200-call warm-up: 10626 B/call averaged over 3024 calls (the fill
ends at call 504), 6.56 B/call in their second half.
"""

CASE = {
    "title": "control: dateparser locale data loaded on first use (504 locales)",
    "kind": "control",
    "link": "https://github.com/scrapinghub/dateparser/blob/master/dateparser/languages/loader.py",
    "package": "dateparser",
    "versions": {"good": "1.2.1"},
    "extra": ["python-dateutil==2.9.0.post0", "six==1.17.0", "pytz==2024.2",
              "regex==2024.11.6", "tzlocal==5.2"],
    "params": {},
    "truth": {
        "1.2.1": {"b_per_call": 3.52, "b_per_call_2nd_half": 0.01, "us_per_call": 324.36},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py control_dateparser_locale_data --warmup 3024 "
        "--calls 6048: a plain loop in the release's venv, 3024 warm-up calls (past the "
        "fill and its settling, six whole cycles), then 6048 calls (twelve); glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call (a 2-core machine under "
        "load). --warmup 3030 --calls 6060 gave 2.11 B/call (-0.7 B/call in the second "
        "half). The fill: truth.py control_dateparser_locale_data --warmup 200 --calls "
        "3024 gave 10625.99 B/call (6.56 B/call in the second half); its shape from heap "
        "samples every 505 calls, and past the fill every 252, of the same loop"
    ),
    "batch": "49c",
}


def setup(params):
    import dateparser
    from dateparser.data.languages_info import language_locale_dict, language_order
    locales = []
    for lang in language_order:
        locales.append(lang)
        locales.extend(language_locale_dict.get(lang, ()))
    return {"parse": dateparser.parse, "locales": locales, "n": 0}


def step(state):
    locales = state["locales"]
    loc = locales[state["n"] % len(locales)]
    state["n"] += 1
    return state["parse"]("12 March 2024 10:30", locales=[loc])
