"""report.html as a person sees it: headless Chromium takes a screenshot, we count plot pixels.

Skips when Chromium is not installed (`apt-get install -y chromium`), unless
HARNESS_REQUIRE_CHROMIUM=1, where it fails instead. The PNG is decoded with zlib and
numpy (no imaging library), and the test counts pixels of the heap line's colour, the
fitted slope's red and the warm-up shading: a page whose SVG did not render has none.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from fakeruntime import Behaviour
from sweepkit import DEFAULTS, FakeSweep

REQUIRE = "HARNESS_REQUIRE_CHROMIUM"
BROWSERS = ("chromium", "chromium-browser")
HEAP_BLUE = (0x1F, 0x77, 0xB4)
FIT_RED = (0xD6, 0x27, 0x28)
WARMUP_GREY = (0xE8, 0xE8, 0xE8)


def browser() -> str:
    found = next((p for p in map(shutil.which, BROWSERS) if p), None)
    if found is None:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but no chromium on PATH\n  fix: apt-get install -y "
                        "chromium", pytrace=False)
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return found


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def decode_png(data: bytes) -> np.ndarray:
    """8-bit RGB/RGBA, non-interlaced PNG -> (height, width, 3) uint8."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            channels = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    prior = np.zeros(stride, dtype=np.uint8)
    rows = []
    for r in range(height):
        kind = raw[r * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, r * (stride + 1) + 1).copy()
        if kind == 1:    # Sub: a running sum per channel, mod 256
            line = np.cumsum(line.reshape(width, channels), axis=0, dtype=np.uint8).ravel()
        elif kind == 2:  # Up
            line = line + prior
        elif kind in (3, 4):  # Average, Paeth: sequential along the row
            out = bytearray(line.tobytes())
            up = prior.tobytes()
            for x in range(stride):
                a = out[x - channels] if x >= channels else 0
                c = up[x - channels] if x >= channels else 0
                pred = (a + up[x]) // 2 if kind == 3 else paeth(a, up[x], c)
                out[x] = (out[x] + pred) & 0xFF
            line = np.frombuffer(bytes(out), np.uint8)
        rows.append(line)
        prior = line
    return np.stack(rows).reshape(height, width, channels)[:, :, :3]


def near(image: np.ndarray, colour: tuple[int, int, int], tol: int = 30) -> int:
    diff = np.abs(image.astype(np.int16) - np.asarray(colour, dtype=np.int16))
    return int(np.all(diff <= tol, axis=2).sum())


@pytest.fixture
def page(fake_sweep: FakeSweep) -> Path:
    return fake_sweep(["20.12", "22.12"], {"22.12": Behaviour(leak_per_iter=16384)},
                      name="shot", defaults={**DEFAULTS, "iterations": 400, "warmup": 40},
                      report=True).root / "report.html"


def test_report_html_renders_its_plots(page: Path, tmp_path: Path) -> None:
    exe = browser()
    shot = tmp_path / "report.png"
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1400,2000",
             page.resolve().as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert shot.is_file(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    image = decode_png(shot.read_bytes())
    assert image.shape == (2000, 1400, 3)
    # THEN the page is not blank, and below the summary table the plots are drawn
    assert (image < 250).any(axis=2).mean() > 0.02
    plots = image[250:]
    # (one heap scale per row since issue 15: the clean cell's heap is a flat line, and
    # both lines lie mostly under the dashed fit; ~50 such pixels, 0 without the SVG)
    assert near(plots, HEAP_BLUE) > 25, "no heap line: the SVG plots did not render"
    # Thresholds: this page has ~1150 / ~600 / ~17600 such pixels; a page whose <svg>
    # elements were removed has 0 / ~30 (the first-bad border is a near red) / ~1600.
    assert near(plots, FIT_RED, 10) > 300, "no fitted slope line"
    assert near(plots, WARMUP_GREY, 4) > 8000, "no warm-up shading"


# Each heatmap column label's text height and its header cell's, measured by Chromium's
# layout once the page has loaded (written into the page, read back with --dump-dom).
MEASURE = """<script>
window.addEventListener('load', function () {
  var out = [];
  document.querySelectorAll('.heat thead th').forEach(function (th) {
    if (!th.textContent) return;
    var r = document.createRange(); r.selectNodeContents(th);
    out.push(th.textContent + ' ' + r.getBoundingClientRect().height + ' '
             + th.getBoundingClientRect().height + ' ' + th.title);
  });
  var pre = document.createElement('pre'); pre.id = 'measured';
  pre.textContent = out.join('\\n'); document.body.appendChild(pre);
});
</script>"""


def test_heatmap_column_labels_are_whole(fake_sweep: FakeSweep, tmp_path: Path) -> None:
    # GIVEN images with labels longer than the header's old fixed height (issue 42:
    # report.html showed "multidict-6" for each of them)
    labels = ["multidict-6.4.4", "multidict-6.5.1", "multidict-6.6.3"]
    root = fake_sweep(labels, {"multidict-6.5.1": Behaviour(leak_per_iter=16384)},
                      name="labels", report=True).root
    page = tmp_path / "measured.html"
    page.write_text((root / "report.html").read_text() + MEASURE)
    exe = browser()
    # WHEN Chromium lays the page out
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
    dom = done.stdout
    assert 'id="measured"' in dom, f"no layout read (exit {done.returncode}): {done.stderr[-2000:]}"
    body = dom.split('id="measured">', 1)[1].split("</pre>", 1)[0]
    measured = [line.split(" ") for line in body.strip().splitlines()]
    # THEN each label is shown whole: its header is at least as tall as its text, and
    # its tooltip names the image
    assert [m[0] for m in measured] == labels
    for label, text_h, box_h, title in measured:
        assert float(text_h) > 0 and float(box_h) >= float(text_h), (label, text_h, box_h)
        assert title == label
