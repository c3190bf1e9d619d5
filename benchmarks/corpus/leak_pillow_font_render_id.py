"""Pillow 10.0.0's FreeType text rendering leaks a Python int every time it draws
text. "Only call text_layout once in getmask2" (first in 10.0.0) rewrote
`font_render()` in `_imagingft.c` so that it takes the image to draw into from a
callback and reads the image's core pointer with
`PyLong_AsSsize_t(PyObject_GetAttrString(image, "id"))`: the attribute's value, a
fresh int holding a 48-bit address, is never released. 9.5.0 rendered into an image
it created itself; 10.2.0 keeps the int in a variable and drops it (PR 7549,
"Decrement reference count for PyObject", for issue 7540).

The scenario renders one glyph with `FreeTypeFont.getmask()` from a minimal TrueType
font (a single box-shaped glyph, built with fontTools and embedded below, so no font
file is needed); what leaks per call is the one int, 32 bytes (48 with malloc's
header).

Truth: benchmarks/corpuskit/truth.py leak_pillow_font_render_id --calls 20000 (20000
calls after 200 warm-up, heap in use after gc.collect(), PYTHONMALLOC=malloc, tcache
off).
It measured 48.4 B/call in 10.0.0 (48.1 in the second half), 0.0 in 9.5.0 and 0.2 in
10.2.0; RSS did not move over 20000 calls (the 1 MB fits in the heap's free pages).
"""

CASE = {
    "title": "Pillow: FreeType text rendering leaks an int per call (10.0.0)",
    "kind": "leak",
    "link": "https://github.com/python-pillow/Pillow/pull/7549",
    "package": "pillow",
    "versions": {"good": "9.5.0", "bad": "10.0.0", "fixed": "10.2.0"},
    "extra": [],
    "params": {"text": "A", "size": 12},
    "truth": {
        "9.5.0": {"b_per_call": 0.0, "b_per_call_2nd_half": 0.0, "us_per_call": 180.2},
        "10.0.0": {"b_per_call": 48.4, "b_per_call_2nd_half": 48.1, "us_per_call": 106.65},
        "10.2.0": {"b_per_call": 0.2, "b_per_call_2nd_half": 0.1, "us_per_call": 68.83},
    },
    "measured": (
        "benchmarks/corpuskit/truth.py leak_pillow_font_render_id --calls 20000: a plain "
        "loop in each release's venv, 200 warm-up calls, then 20000 calls; glibc heap "
        "in use (mallinfo2) after gc.collect() before, at the half and after, "
        "PYTHONMALLOC=malloc, tcache off; median time per call"
    ),
    "batch": "49",
}

# A 612-byte TrueType font: ".notdef" and "A" (a filled box), made with fontTools'
# FontBuilder.
FONT_B64 = (
    "AAEAAAAKAIAAAwAgT1MvMkUgRP0AAAEoAAAAYGNtYXAADACUAAABkAAAADRnbHlm99FWagAAAcwA"
    "AAAaaGVhZC/FjoQAAACsAAAANmhoZWEFegH2AAAA5AAAACRobXR4ArwAAAAAAYgAAAAGbG9jYQAN"
    "AAAAAAHEAAAABm1heHAABAAGAAABCAAAACBuYW1l8A8TigAAAegAAABUcG9zdAAoAAAAAAI8AAAA"
    "JgABAAAAAQAA2xYc518PPPUAAwPoAAAAAOcrpXQAAAAA5yuldABkAAAB9AK8AAAAAwACAAAAAAAA"
    "AAEAAAMg/zgAAAJYAGQAZAH0AAEAAAAAAAAAAAAAAAAAAAABAAEAAAACAAQAAQAAAAAAAgAAAAAA"
    "AAAAAAAAAAAAAAAAAwJYAZAABQAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB"
    "AAAAAAAAAAAAAAAAPz8/PwAAAEEAQQMgAAAAAAMgAMgAAAAAAAAAAAAAAAAAAAAgAAACWAAAAGQA"
    "AAAAAAIAAAADAAAAFAADAAEAAAAUAAQAIAAAAAQABAABAAAAQf//AAAAQf///8AAAQAAAAAAAAAA"
    "AA0AAAABAGQAAAH0ArwAAwAAMxEhEWQBkAK8/UQAAAAAAAAEADYAAQAAAAAAAQADAAAAAQAAAAAA"
    "AgAHAAMAAwABBAkAAQAGAAoAAwABBAkAAgAOABBCb3hSZWd1bGFyAEIAbwB4AFIAZQBnAHUAbABh"
    "AHIAAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACAAAAJAAA"
)


def setup(params):
    import base64
    import io

    from PIL import ImageFont

    font = ImageFont.truetype(io.BytesIO(base64.b64decode(FONT_B64)),
                              int(params.get("size", 12)))
    return {"font": font, "text": params.get("text", "A")}


def step(state):
    return state["font"].getmask(state["text"]).size
