"""Issue 41's reproductions: the same samples get the same verdict in every mode, an
`ok` is never steady growth above the per-call floor, and a timeout keeps its evidence."""

from __future__ import annotations

import re

import pytest
from fakeruntime import Behaviour
from sweepkit import FakeSweep

from harness.answers.search import answer_rows
from harness.cli import main
from harness.result.model import cell_text
from harness.thresholds import AnalysisConfig

CFG = AnalysisConfig()
FIXED = {"iterations": 1000, "warmup": 10, "sample_every": 5, "repeats": 0}
LIVE = {"max_iterations": 1000, "min_iterations": 80, "warmup": 10, "sample_every": 5,
        "repeats": 0}


def test_a_steady_200_bytes_a_call_is_a_leak_with_iterations_and_with_max_iterations(
        fake_sweep: FakeSweep) -> None:
    # GIVEN a heap that keeps 200 B a call (the fake's heap is half its memory), 1,000
    # calls: 195 KiB in all, under the heap's 256 KiB floor, with a tight interval
    leak = Behaviour(leak_per_iter=400.0, heap_noise=64.0)
    for defaults in (FIXED, LIVE):
        (res,) = fake_sweep(["v1"], leak, defaults=defaults).results.values()
        # THEN both modes say leak, the heap among the sources leaking
        assert res.verdict == "leak", (defaults, res.reason)
        assert any(f.text.startswith("leak: heap") for f in res.findings), res.findings


def test_a_cache_that_filled_and_stopped_is_a_plateau_in_both_modes(
        fake_sweep: FakeSweep) -> None:
    # GIVEN a heap that grows 2 KiB a call for its first 400 calls, then nothing, run to
    # 3,000 calls: the live decider may look while it still grows
    fill = Behaviour(leak_per_iter=4096.0, leak_until=400, heap_noise=64.0)
    grew = 2048.0 * (400 - 10) / 2**20       # the heap's growth over the measured calls
    for defaults in (dict(FIXED, iterations=3000), dict(LIVE, max_iterations=3000)):
        (res,) = fake_sweep(["v1"], fill, defaults=defaults).results.values()
        # THEN the verdict is read from all 3,000 calls' samples: a plateau
        assert res.verdict == "plateau", (defaults, res.reason)
        # AND its reason says how much it grew, not "+0.00 MiB"
        said = re.search(r"grew \+([\d.]+) MiB", res.reason)
        assert said is not None and abs(float(said.group(1)) - grew) < 0.2 * grew, res.reason


def test_a_timeout_after_a_leak_keeps_its_evidence_and_is_the_rows_first_bad(
        fake_sweep: FakeSweep) -> None:
    # GIVEN a row where every image is killed at its timeout; v2's RSS and USS grew
    # 6 KiB a call before it (its heap read only three times: no readings to decide)
    def behave(label: str) -> Behaviour:
        return Behaviour(leak_per_iter=6144.0 if label == "v2" else 0.0, timed_out=True,
                         heap_samples=3)

    run = fake_sweep(["v1", "v2"], lambda cell: behave(cell.image.label), defaults=FIXED)
    by_label = {r.image.label: r for r in run.results.values()}
    bad, clean = by_label["v2"], by_label["v1"]
    # THEN no cell reads "+0.0 KiB/call" for a source with no readings
    for res in (bad, clean):
        assert "+0.0 KiB/call" not in cell_text(res), cell_text(res)
    assert "heap no readings" in cell_text(clean), cell_text(clean)
    # AND the leaking cell says what memory did before the timeout
    assert "timeout after" in bad.reason and "KiB/call" in bad.reason, bad.reason
    assert re.search(r"\+6\.0 KiB/call", bad.reason), bad.reason
    # AND the row names it as the first bad, a finding about the image
    (row,) = answer_rows(run.results)
    assert row.first_bad == "v2", row.sentence
    assert "not findings about the images" not in row.sentence, row.sentence


def test_an_ok_says_the_smallest_leak_it_could_have_missed_everywhere(
        fake_sweep: FakeSweep, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a row whose v1 is clean and v2 leaks 16 KiB a call
    run = fake_sweep(["v1", "v2"], {"v2": Behaviour(leak_per_iter=16384.0)}, report=True,
                     plan=True)
    ok = next(r for r in run.results.values() if r.image.label == "v1")
    assert ok.verdict == "ok", ok.reason
    # THEN its words, its result (the bound per source, the reason), report.md and the
    # issue draft all say how small a steady leak it could have missed
    said = re.search(r"no leak above (\d+) B/call in 300 calls", cell_text(ok))
    assert said is not None, cell_text(ok)
    heap = ok.memory["heap"]
    assert heap.missed is not None and heap.missed >= CFG.live_floor_bytes
    # derived from the run's own noise: the floor plus the interval's lower half-width
    assert heap.missed == pytest.approx(CFG.live_floor_bytes + heap.slope - heap.slope_lo)
    assert "no leak above" in ok.reason
    assert said.group(0) in (run.root / "report.md").read_text()
    assert main(["report", str(run.root), "--issue", ok.row]) == 1   # as `report` exits
    assert "no leak above" in capsys.readouterr().out


def test_a_timeout_says_how_its_step_time_rose_before_it(fake_sweep: FakeSweep) -> None:
    # GIVEN a cell whose every call is 10 us slower than the last, killed at its timeout
    (res,) = fake_sweep(["v1"], Behaviour(timed_out=True, slowdown_per_iter=1e-5),
                        defaults=FIXED).results.values()
    # THEN it stays a timeout, and its reason says what memory and step time did
    assert res.verdict == "timeout", res.reason
    assert res.steps is not None
    said = re.search(r"steps ([\d.]+)x slower late than early", res.reason)
    assert said is not None and float(said.group(1)) == pytest.approx(res.steps.ratio, 0.01)
    assert "timeout after rss grew" in res.reason, res.reason
