"""air: every tag built grows its class's attribute list for good (calls slow down).

``air.tags`` (the Air web framework's HTML tags) keeps one module-level dict,
``html_attributes`` (``HTML_ATTRIBUTES`` from 0.21.0), of the attribute names each tag
class takes. A tag's ``__init__`` passes its locals to ``locals_cleanup``, which from
0.15.0 on did ``attrs = html_attributes.get(cls_name, [])`` and then
``attrs += ["class_", "id", "style"]`` (``"for_", "as_"`` too from 0.25.0): ``+=`` on
the dict's own list, so every ``A(...)``, ``Li(...)``, ``Ul(...)`` (any tag with an
entry in the dict) makes that class's list three (five) entries longer for the life of
the process, and ``locals_cleanup`` then walks the whole list (``attr in local_data``)
on every tag built: a leak of 24-40 B per tag and a tag that is slower than the one
before, linear in the tags built so far. Fixed in 0.25.2 by PR 343 ("Fix memory leak":
``attrs = HTML_ATTRIBUTES.get(...) + [...]``, a new list). 0.14.2, the last release
before, looped over the dict's list without touching it.

The step renders a contact form as a page does: ``Form(Fieldset(Label, Input,
Select(Option), Textarea), Ul(Li(A)), Img, Button)``, twelve tags, each of a class with
an entry in the dict (36 list slots per call in 0.15.0, 60 in 0.25.1).

0.25.2 itself builds a tag in about twice 0.14.2's time (~60 against ~30 us for this
step, flat in both): slower than the good release for reasons of its own, not this bug.

Truth, by hand, in each release's venv (CPython 3.11): benchmarks/corpuskit/truth.py,
heap bytes per call (mallinfo2 after gc.collect()) and the per-call time of the first
and the last tenth of the calls after 200 warm-up calls.
"""

CASE = {
    "title": "air: each tag built grows its class's attribute list (leak, calls slow down)",
    "kind": "leak",
    "link": "https://github.com/feldroy/air/pull/343",
    "package": "air",
    "versions": {"good": "0.14.2", "bad": "0.15.0", "fixed": "0.25.2"},
    "extra": ["fastapi==0.165.0"],
    "params": {},
    "truth": {
        "0.14.2": {"b_per_call": 0.14, "b_per_call_2nd_half": 0.03, "us_per_call": 30.54,
                   "us_per_call_first": 30.68, "us_per_call_last": 30.46},
        "0.15.0": {"b_per_call": 306.61, "b_per_call_2nd_half": 317.79,
                   "us_per_call": 1567.34, "us_per_call_first": 442.9,
                   "us_per_call_last": 2745.0},
        "0.25.2": {"b_per_call": 0.14, "b_per_call_2nd_half": 0.03, "us_per_call": 60.45,
                   "us_per_call_first": 61.0, "us_per_call_last": 60.06},
    },
    "measured": (
        "PYTHONPATH=. python3 benchmarks/corpuskit/truth.py leak_air_locals_cleanup_attrs "
        "--calls 3000 --warmup 200 --jobs 1: a plain loop in each release's venv, 200 "
        "warm-up calls, then 3000 calls; glibc heap in use (mallinfo2) after gc.collect() "
        "before, at the half and after, PYTHONMALLOC=malloc, tcache off; median time per "
        "call, and of the first and the last tenth of the calls (a loaded 2-core host). "
        "0.15.0: 306.6 B/call (317.8 in the second half; 36 list slots a call, 12 tags "
        "with an entry), 443 -> 2745 us/call (6.2x within the 3000 calls); 0.14.2 and "
        "0.25.2: 0.14 B/call, flat time. Beside them: 0.14.0 0.14 B/call, 30.0 -> 29.5 "
        "us/call; 0.25.1 (the last bad release, five names a tag) 508.1 B/call (508.1 in "
        "the second half), 644 -> 4881 us/call. By hand before the case, 16 blocks of "
        "200 calls with an earlier step (a nav list, 11 tags): 0.15.0 476 -> 13702 "
        "us/call, 0.25.1 873 -> 20988, 0.14.0 and 0.25.2 flat."
    ),
}


def setup(params):
    import air

    return {"air": air, "n": 0}


def step(state):
    a = state["air"]
    n = state["n"] = state["n"] + 1
    form = a.Form(
        a.Fieldset(
            a.Label("Name", for_="name"),
            a.Input(type="text", name="name", id="name", value=f"user {n}"),
            a.Select(a.Option("Support", value="support"), name="topic"),
            a.Textarea("Hello", name="body"),
        ),
        a.Ul(a.Li(a.A("Terms", href="/terms"))),
        a.Img(src="/logo.png", alt="logo"),
        a.Button("Send", type="submit"),
        action="/contact", method="post",
    )
    form.render()
