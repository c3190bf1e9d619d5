"""Issue 15 point 5: report.html shows the evidence, checked as a picture (headless
Chromium at 1400 and 800 px): the step-time axis is not scaled by the slow first warm-up
step, the baseline's steps are overlaid, one heap scale per row (a 30 KiB drift next to
a 3.5 MiB leak is flat), no panel for the local runtime's whole-machine cgroup, and the
summary table filters (report.html#filter=TEXT)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sweepkit
from fakeruntime import Behaviour, FakeRuntime, step_times

from harness.protocol.ingest import _float64s
from harness.runtimes.base import Progress, RunOutcome, RunRequest
from tests.integration.test_html_screenshot import browser, decode_png, near

STEP = (0x2C, 0x3E, 0x70)
BASELINE_GREY = (0x99, 0x99, 0x99)
FIT_RED = (0xD6, 0x27, 0x28)
CGROUP_BROWN = (0x8C, 0x56, 0x4B)


class LocalLike(FakeRuntime):
    """FakeRuntime samples as the local runtime records them: a 41 ms first warm-up
    step, the machine's cgroup (10 GiB), USS read during import only."""

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        out = super().run(request, progress)
        path = request.outdir / "samples.jsonl"
        recs: list[dict[str, Any]] = [json.loads(x) for x in path.read_text().splitlines()]
        samples = [r for r in recs if r.get("type") == "sample"]
        first = _float64s(samples[0]["dt_b64"]) or []
        samples[0]["dt_b64"] = step_times([0.041, *first[1:]])     # 41 ms
        for r in samples:
            r["cgroup"] = 10.2 * 2**30 + (r["i"] % 7) * 2**20
            if r["i"] > 20:
                r.pop("uss", None)
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        return out


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = {"v1": Behaviour(leak_per_iter=30.0, step_s=0.00033, noise=2048),
             "v2": Behaviour(leak_per_iter=6000.0, step_s=0.00039, noise=2048),
             "v3": Behaviour(step_s=0.00033, noise=2048)}
    return sweepkit.swept(
        tmp_path_factory.mktemp("evidence"), ["v1", "v2", "v3"],
        LocalLike(lambda c: table[c.image.label], name="local"), ["s.py"], name="ev",
        gpus=None, defaults={**sweepkit.DEFAULTS, "iterations": 600, "warmup": 60},
        files={"s.py": "def setup(p):\n    return None\n\n\ndef step(s):\n    pass\n"},
        report=True).root / "report.html"


def shoot(page: Path, width: int, out: Path) -> np.ndarray:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--screenshot={out}",
                        f"--window-size={width},2400", page.resolve().as_uri()],
                       capture_output=True, text=True, timeout=120, check=False)
    assert out.is_file(), "no screenshot"
    return decode_png(out.read_bytes())


def mask(image: np.ndarray, colour: tuple[int, int, int], tol: int) -> np.ndarray:
    diff = np.abs(image.astype(np.int16) - np.asarray(colour, dtype=np.int16))
    return np.all(diff <= tol, axis=2)


def groups(m: np.ndarray, gap: int = 60) -> list[np.ndarray]:
    """The mask split into vertical groups (one per cell's plot), top to bottom."""
    rows = np.flatnonzero(m.any(axis=1))
    if rows.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(rows) > gap)
    out = []
    for part in np.split(rows, cuts + 1):
        sub = np.zeros_like(m)
        sub[part[0]:part[-1] + 1] = m[part[0]:part[-1] + 1]
        out.append(sub)
    return out


def spread(m: np.ndarray, skip_left: float = 0.2) -> float:
    """Interquartile height (px) of the mask's pixels right of its left `skip_left`."""
    ys, xs = np.nonzero(m)
    keep = xs > xs.min() + skip_left * (xs.max() - xs.min())
    q1, q3 = np.percentile(ys[keep], [25, 75])
    return float(q3 - q1)


@pytest.mark.parametrize("width", [1400, 800])
def test_the_evidence_is_visible(page: Path, width: int, tmp_path: Path) -> None:
    image = shoot(page, width, tmp_path / f"evidence-{width}.png")
    # step time: three plots, none flattened by the 41 ms warm-up step
    steps = groups(mask(image, STEP, 12))
    assert len(steps) == 3, len(steps)
    for g in steps:
        assert spread(g) >= 5, "step times squashed to a line: the axis follows warm-up"
    # the baseline (v1) overlaid on v2's and v3's step plots
    assert mask(image, BASELINE_GREY, 6).sum() > 150, "no baseline overlay"
    # one memory scale per source across the row: v1's 30 B/call drift is flat, v2's
    # leak climbs (the fitted slopes, dashed red, drawn over the heap and RSS lines)
    # Only the cells' cards: above them the overview outlines the first bad in red too.
    cards = mask(image, FIT_RED, 10)
    cards[:max(0, int(np.nonzero(steps[0])[0].min()) - 80)] = False
    fits = [g for g in groups(cards)
            if np.ptp(np.nonzero(g)[1]) > 120]       # lines, not the red "first bad" badges
    assert len(fits) == 3, len(fits)
    assert spread(fits[0], 0.0) < 4, "the drift fills its plot: not one scale per row"
    assert spread(fits[1], 0.0) > 20, "the leak does not climb"
    # no panel for the local runtime's cgroup (the whole machine)
    assert near(image, CGROUP_BROWN, 10) == 0


def test_summary_filters_from_the_address(page: Path) -> None:
    def dom(fragment: str) -> str:
        with tempfile.TemporaryDirectory() as profile:
            done = subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu",
                                   "--no-first-run", f"--user-data-dir={profile}",
                                   "--dump-dom", page.resolve().as_uri() + fragment],
                                  capture_output=True, text=True, timeout=120, check=False)
        body = done.stdout
        start = body.index("<tbody>", body.index('id="filter"'))   # the summary table's
        return body[start:body.index("</tbody>", start)]

    assert "hidden" not in dom("#filter=cpu.s")
    assert '<tr hidden="">' in dom("#filter=no-such-row")
