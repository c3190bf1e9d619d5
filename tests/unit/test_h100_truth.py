"""Real runs on an H100, decided again with today's code, against what each scenario
truly does (tests/data/h100/README.md: the truth table).

What a user reads must say the truth: the memory that leaks most carries the leak (and
the others are named after it), no false "no-gpu" on a PyTorch or JAX cell, a device
leak decided live at the first look.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.reanalyze import reanalyze
from harness.result.model import CellResult, cell_text
from harness.store import SeriesCache
from harness.store.gate import read_run
from harness.thresholds import AnalysisConfig

H100 = Path(__file__).resolve().parents[1] / "data" / "h100"


def decided(run: str) -> dict[str, CellResult]:
    root = H100 / run
    results, _ = reanalyze(read_run(root).results, SeriesCache(root), AnalysisConfig())
    return {cid.removeprefix("torch.gpu0."): r for cid, r in results.items()}


@pytest.fixture(scope="module")
def real() -> dict[str, CellResult]:
    return decided("gpu-real")


@pytest.fixture(scope="module")
def live() -> dict[str, CellResult]:
    return decided("gpu-live")


def rate(reason: str, source: str) -> float:
    """KiB/call the reason gives a source ("gpu grows +1.0 MiB/call", "also heap +2.4
    KiB/call", "+84 B/call")."""
    m = re.search(rf"\b{re.escape(source)}(?: grows)? ([+-][\d.,]+)(?: (B|KiB|MiB)/call)?",
                  reason)
    assert m, f"{source} not named in {reason!r}"
    scale = {"B": 1 / 1024, "MiB": 1024.0}.get(m.group(2) or "KiB", 1.0)
    return float(m.group(1).replace(",", "")) * scale


# cell -> (verdict, carrier(s) allowed, sources the reason must name with KiB/call)
TRUTH = {
    "gpu_leak": ("leak", {"gpu", "fw"}, {"gpu": 1024.0, "fw": 1024.0}),
    "jax_leak": ("leak", {"fw"}, {"fw": 1024.0}),
    "gpu_fft_plans": ("leak", {"heap", "uss+rss", "gpu"}, {"heap": 318.0, "gpu": 229.0}),
    "gpu_rfft": ("ok", {"heap"}, {}),
    "rfft_const": ("ok", {"heap"}, {}),
    "gpu_slowdown": ("slowdown", {None}, {}),
}


@pytest.mark.parametrize("cell", sorted(TRUTH))
def test_fixed_length_runs_say_what_leaks(real: dict[str, CellResult], cell: str) -> None:
    verdict, carriers, named = TRUTH[cell]
    res = real[cell]
    assert res.verdict == verdict, res.reason
    assert res.carrier in carriers, res.reason
    for source, kib in named.items():
        assert rate(res.reason, source) == pytest.approx(kib, rel=0.02), res.reason
    # The table shows the carrier's figure, not the heap's.
    if res.carrier in ("gpu", "fw"):
        assert cell_text(res).startswith(f"leak: {res.carrier} +1.0 MiB/call")


@pytest.mark.parametrize("run", ["gpu-real", "gpu-live"])
def test_no_false_no_gpu_on_torch_or_jax(run: str) -> None:
    for cid, res in decided(run).items():
        assert not any(f.kind == "no-gpu" for f in res.findings), (cid, res.reason)
        assert "no-gpu" not in res.reason, cid


def test_a_device_leak_is_decided_live_at_the_first_look_past_the_size_that_matters(
        live: dict[str, CellResult]) -> None:
    """The agent samples every 10 calls after 50 of warm-up: a 1 MiB/call leak is
    stopped live at the first look where it has grown `leak_large_bytes` (256 MiB), not
    at the first look (issue 20 asked for 60 calls; issue 49 withdrew that goal: below
    that size a leak runs to its budget, which could still show it level off)."""
    large = AnalysisConfig().leak_large_bytes / 2**20      # MiB, at 1 MiB a call
    res = live["gpu_leak"]
    assert res.verdict == "leak" and res.live is not None, res.reason
    assert res.live.source in {"gpu", "fw"} and res.carrier in {"gpu", "fw"}
    # What it rose is measured from the median of its first five readings (the third,
    # 30 calls in): the look that stops it comes up to four readings after 256 calls
    assert large <= res.live.calls_to_decision <= large + 40, res.live
    # jax_leak's recorded run stopped at 131 calls (the rule before): no look of it
    # reached that size, and its verdict is read from all of it
    jax = live["jax_leak"]
    assert jax.verdict == "leak" and jax.carrier == "fw" and jax.live is None, jax.reason


def test_live_stable_and_slowdown_and_oom(live: dict[str, CellResult]) -> None:
    assert live["gpu_rfft"].verdict == "ok"
    assert live["gpu_wait_slowdown"].verdict == "slowdown"
    assert "wait-bound" in live["gpu_wait_slowdown"].reason
    oom = live["gpu_oom"]
    assert oom.verdict == "oom" and "CUDA out of memory" in oom.reason


def test_the_done_command_names_the_device_memory(capsys: pytest.CaptureFixture[str]) -> None:
    """`harness report tests/data/h100/gpu-real --reanalyze`, as issue 20 states it."""
    assert main(["report", str(H100 / "gpu-real"), "--reanalyze"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"gpu0\.gpu_leak\s+leak: (gpu|fw) \+1\.0 MiB/call", out)
    assert re.search(r"gpu0\.jax_leak\s+leak: fw \+1\.0 MiB/call", out)
    assert "no-gpu" not in out


def test_every_renderer_shows_the_carriers_figure(real: dict[str, CellResult]) -> None:
    """report.md, report.html, junit.xml and the issue draft lead a GPU leak with the
    device's 1 MiB/call, never the heap's 2.4 KiB/call."""
    from harness.report import (
        HtmlReporter,
        IssueReporter,
        JunitReporter,
        MarkdownReporter,
        render_text,
    )
    from harness.report.model import Report

    report = Report.from_results("gpu-real", {f"torch.gpu0.{c}": r for c, r in real.items()})
    for reporter in (MarkdownReporter, HtmlReporter, JunitReporter):
        text = render_text(reporter.from_results(report))
        # The cell's figure ("gpu +1.0 MiB/call, 59.8 µs/call"), in table or message
        assert "gpu +1.0 MiB/call, " in text, reporter
        assert "fw +1.0 MiB/call, " in text, reporter          # jax_leak
        assert "heap +2.4 KiB/call, " not in text and "KiB/iteration" not in text, reporter
    issue = render_text(IssueReporter.from_results(report, "gpu0.gpu_leak"))
    assert "| verdict | leak: gpu grows +1.0 MiB/call" in issue
    # The heap's +2.4 KiB/call (the list of kept tensors) is no longer named: +3.5 MiB
    # over 1,500 calls on a 200 MB heap could be a cache still filling (issue 37)
    assert "also fw +1.0 MiB/call" in issue


def test_the_fixed_length_device_leak_replayed_live_is_decided_within_three_looks() -> None:
    """gpu-real's gpu_leak (device read every 50 calls, first look at 60 measured calls)
    fed sample by sample to the sweep's live decider, and to each source alone: the
    device's memory (the agent's `gpu_used`) and the allocator decide at the same call."""
    from harness.analysis.sequential import LiveDecider, replay_live
    from harness.protocol.ingest import Record, read_samples

    cfg = AnalysisConfig()
    series = read_samples(H100 / "gpu-real" / "cells" / "torch.gpu0.gpu_leak" / "samples.jsonl")
    warm = max(s["i"] for s in series.samples if s["phase"] != "measure")
    calls = sorted(s["i"] - warm for s in series.samples
                   if s["phase"] == "measure" and "gpu_used" in s)
    # The first look past the size that matters (1 MiB a call: past 256 calls)
    look = next(c for c in calls if c >= cfg.leak_large_bytes / 2**20)
    third = calls[calls.index(look) + 3]
    got = replay_live(cfg, series, 50, 3000)
    assert got is not None and got.verdict == "leak" and got.source == "gpu", got
    assert (look, third) == (260, 410) and look <= got.iterations <= third, got

    def alone(source: str) -> int | None:
        base = LiveDecider(cfg, 50, 3000)
        decider = LiveDecider(cfg, 50, 3000, source, floor=base.floor,
                              min_growth=base.min_growth, decay_ratio=base.decay_ratio)
        for fields in series.samples:
            if (found := decider.feed(Record("sample", 0, fields))) is not None:
                return found.iterations
        return None

    assert alone("gpu") == alone("fw") == got.iterations
    # The heap alone (the list of kept tensors, 2.4 KiB/call: a real host leak) never
    # grows to the size that stops a run: it runs to its end, where it is decided
    assert alone("heap") is None
