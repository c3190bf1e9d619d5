"""`harness fit`'s planner (pure) and memory lines, against stated boundaries."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.analysis.records import size
from harness.fit import FitStep, fit_line, fit_sources, limiting, peaks, plan_fit, probe_bound
from harness.protocol.ingest import parse_lines
from harness.runtimes.base import own_cgroup


def drive(lo: int, hi: int, truth: Callable[[int], str],
          predict: Callable[[dict[int, str]], float | None] = lambda _: None
          ) -> tuple[list[int], FitStep]:
    """Run the planner against `truth(value)`; return the probed values and the end."""
    seen: dict[int, str] = {}
    probed: list[int] = []
    while True:
        step = plan_fit(lo, hi, seen, len(probed), predict(seen))
        if step.action != "probe":
            return probed, step
        assert step.value is not None and lo <= step.value <= hi
        assert step.value not in seen          # nothing is probed twice
        probed.append(step.value)
        seen[step.value] = truth(step.value)


def below(boundary: int, failure: str = "oom") -> Callable[[int], str]:
    return lambda v: "fit" if v <= boundary else failure


@pytest.mark.parametrize(("lo", "hi"), [(1, 1), (1, 2), (1, 64), (0, 100), (4, 9), (1, 1000)])
def test_every_boundary_is_found_within_the_bound(lo: int, hi: int) -> None:
    for boundary in range(lo - 1, hi + 1):
        probed, step = drive(lo, hi, below(boundary))
        assert step.action == "done" and step.fits == boundary, (lo, hi, boundary)
        assert len(probed) <= probe_bound(lo, hi) == math.ceil(math.log2(hi - lo + 1)) + 3


@pytest.mark.parametrize("error", [0.0, 0.05, -0.05, 0.5, -0.5, 3.0, -0.9])
def test_a_wrong_prediction_never_breaks_the_bound(error: float) -> None:
    # GIVEN a prediction off by `error` (relative) from the true boundary
    for boundary in range(0, 65):
        probed, step = drive(1, 64, below(boundary),
                             lambda seen, b=boundary: (b + 0.5) * (1 + error)
                             if sum(o == "fit" for o in seen.values()) >= 2 else None)
        assert step.fits == boundary
        assert len(probed) <= 9


def test_an_exact_prediction_needs_few_probes() -> None:
    # GIVEN the memory model predicts 16.6 once two values fit (boundary 16)
    probed, step = drive(1, 64, below(16), lambda seen: 16.6 if len(seen) >= 2 else None)
    # THEN lo, the doubling, above the prediction (fails), the prediction (fits)
    assert probed == [1, 2, 17, 16]
    assert step.fits == 16 and step.fails == 17


def test_crash_and_timeout_do_not_fit_and_stop_on_unavailable() -> None:
    for failure in ("crash", "timeout"):
        _, step = drive(1, 32, below(5, failure))
        assert (step.fits, step.fails) == (5, 6)
    probed, step = drive(1, 32, lambda v: "unavailable")
    assert step.action == "stop" and probed == [1] and step.why.startswith("unavailable at 1")


def test_known_results_are_not_probed_again() -> None:
    # GIVEN value 8 fit and 9 failed earlier (on disk): nothing to run
    step = plan_fit(1, 64, {8: "fit", 9: "oom"}, 0)
    assert step.action == "done" and step.fits == 8
    # GIVEN only 40 fit: everything below fits, the next probe is above it
    step = plan_fit(1, 64, {40: "fit"}, 0)
    assert step.action == "probe" and step.value is not None and step.value > 40


def test_a_failure_below_a_fit_is_named() -> None:
    step = plan_fit(1, 64, {4: "crash", 8: "fit", 9: "oom"}, 3)
    assert step.action == "done" and step.fits == 8 and step.conflicts == (4,)


def test_planner_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="empty range"):
        plan_fit(5, 4, {}, 0)
    with pytest.raises(ValueError, match="out of range"):
        plan_fit(1, 4, {9: "fit"}, 0)
    with pytest.raises(ValueError, match="unknown outcome"):
        plan_fit(1, 4, {2: "leak"}, 0)


def test_line_through_peaks_and_its_limit() -> None:
    # GIVEN peaks of 1 GiB + 100 MiB per unit at 1, 2 and 4
    mib = 1 << 20
    line = fit_line("rss", [(1, 1124 * mib), (2, 1224 * mib), (4, 1424 * mib)])
    assert line is not None
    assert line.fixed == pytest.approx(1024 * mib) and line.per_unit == pytest.approx(100 * mib)
    assert line.text("batch") == "fixed 1 GiB + 100 MiB per batch"
    assert line.limit_value(2048 * mib) == pytest.approx(10.24)
    assert fit_line("rss", [(3, 1.0), (3, 2.0)]) is None      # one value: no slope
    lines = fit_sources({1: {"rss": 2.0, "fw": 5.0}, 2: {"rss": 3.0, "fw": 7.0}})
    assert sorted(lines) == ["fw", "rss"]
    # the device limit wins when the run used one; the host's otherwise
    got = limiting(lines, 100.0, 50.0)
    assert got is not None and got[0].source == "fw" and got[1] == 100.0
    got = limiting(lines, None, 50.0)
    assert got is not None and got[0].source == "rss"
    assert limiting(lines, None, None) is None
    assert size(1.1 * (1 << 30)) == "1.1 GiB" and size(450 * mib) == "450 MiB"


def test_a_flat_device_line_gives_way_to_the_host_limit() -> None:
    """A GPU cell whose scenario holds host memory (seen on the simulated RTX 3090 host:
    no prediction because the flat `gpu` line was taken for the device's limit)."""
    from harness.fit import Line

    lines = {"gpu": Line("gpu", 2 * 2**20, 0.0, ((1, 2.0 * 2**20), (4, 2.0 * 2**20))),
             "rss_anon": Line("rss_anon", 8 * 2**20, 2**20, ((1, 9.0 * 2**20), (4, 12.0 * 2**20)))}
    hit = limiting(lines, 24 * 2**30, 256 * 2**20)
    assert hit is not None and hit[0].source == "rss_anon" and hit[1] == 256 * 2**20


def test_an_intercept_below_zero_is_no_fixed_memory() -> None:
    # GIVEN uss peaks whose straight line has its intercept at -27.7 MiB (the issue's)
    mib = 1 << 20
    line = fit_line("uss", [(v, -27.7 * mib + 1.84 * mib * v) for v in (32, 64, 128)])
    assert line is not None and line.fixed == pytest.approx(-27.7 * mib)
    # THEN its words never show the negative part as memory, and say why
    text = line.text("keys")
    assert not line.resolved and "-" not in text.split("(")[0], text
    assert text.startswith("1.84 MiB per keys, fixed part not resolved (the fit's intercept "
                           "is below zero: the line through the probes is under 0 bytes "
                           "below keys=15.1)"), text
    # AND its slope still meets a limit where the line does
    assert line.limit_value(1024 * mib) == pytest.approx((1024 + 27.7) / 1.84)
    # AND an intercept of zero or more is memory
    assert fit_line("uss", [(1, 3.0 * mib), (2, 4.0 * mib)]).text("keys") == (  # type: ignore[union-attr]
        "fixed 2 MiB + 1 MiB per keys")


@pytest.mark.parametrize(("runtime", "own"), [
    ("docker", True), ("slurm/docker", True), ("local", False), ("slurm/local", False),
    ("", False)])
def test_only_a_cell_with_its_own_cgroup_fits_the_cgroup(runtime: str, own: bool) -> None:
    # GIVEN a run whose agent read rss and a cgroup
    lines = [{"type": "header", "schema": 1}] + [
        {"type": "sample", "src": "step", "phase": "measure", "i": i, "t": i * 0.01,
         "rss": 100 * 2**20 + i, "cgroup": 6 * 2**30 + i, "dt": [0.01]} for i in range(1, 9)]
    series = parse_lines([(json.dumps(r) + "\n").encode() for r in lines])
    # THEN the cgroup's peak is the cell's only where its runtime gave it one
    assert own_cgroup(runtime) is own
    assert ("cgroup" in peaks(series, runtime)) is own and "rss" in peaks(series, runtime)


def test_a_peak_between_two_samples_is_read_from_the_high_water_mark() -> None:
    # GIVEN a probe whose samples saw at most 400 MiB resident, 300 MiB of it anonymous
    # (100 MiB of libraries' file pages), while the kernel's high-water mark says a step
    # reached 480 MiB between two samples
    mib = 2**20
    samples = [{"type": "sample", "src": "step", "phase": "measure", "i": i, "t": i * 0.05,
                "rss": (380 + 5 * (i % 5)) * mib, "rss_anon": (280 + 5 * (i % 5)) * mib,
                "dt": [0.05]} for i in range(1, 9)]
    def read(end: dict[str, object]) -> dict[str, float]:
        lines = [{"type": "header", "schema": 1}, *samples, {"type": "end", **end}]
        return peaks(parse_lines([(json.dumps(r) + "\n").encode() for r in lines]), "docker")
    # THEN the peaks are the mark, and the mark less the file-backed part
    got = read({"status": "ok", "rss_hwm": 480 * mib})
    assert got["rss"] == 480 * mib and got["rss_anon"] == 380 * mib
    # AND without the mark (an older agent, a run killed before its end) the samples'
    assert read({"status": "ok"})["rss_anon"] == 300 * mib
    # AND a mark under the samples' peak (read by another process) lowers nothing
    assert read({"status": "ok", "rss_hwm": 200 * mib})["rss"] == 400 * mib


def test_file_pages_reclaimed_after_the_peak_do_not_raise_the_anonymous_peak() -> None:
    # GIVEN a probe near its memory limit (readings of a busy CI's conv net, batch 1 under
    # 512 MiB): 210 MiB of libraries' file pages resident after its setup, reclaimed to
    # 168 MiB by its last sample; anonymous memory seen at most at 366 MiB; the kernel's
    # high-water mark of its RSS 554 MiB, reached while the file pages were resident
    mib = 2**20
    readings = [(423, 213), (437, 232), (543, 367), (512, 344)]     # (rss, rss_anon) MiB
    lines = [{"type": "header", "schema": 1}] + [
        {"type": "sample", "src": "step", "phase": "measure", "i": i, "t": i * 0.1,
         "rss": rss * mib, "rss_anon": anon * mib, "dt": [0.1]}
        for i, (rss, anon) in enumerate(readings, 1)] + [
        {"type": "end", "status": "ok", "rss_hwm": 554 * mib}]
    got = peaks(parse_lines([(json.dumps(r) + "\n").encode() for r in lines]), "docker")
    # THEN the anonymous peak is at least the mark less the most file pages seen (554 -
    # 210 = 344, under the 367 seen: the samples' peak stands), not the mark less the
    # last sample's (554 - 168 = 386 MiB, more than the probe held)
    assert got["rss_anon"] == 367 * mib and got["rss"] == 554 * mib


def test_a_fit_probe_reads_the_heap_as_the_program_leaves_it(tmp_path: Path) -> None:
    """A probe runs `heap: stock` whatever the matrix says: the quiet heap's collections
    and thread cache off lowered TF's peaks, and the fit then answered 13 where the plain
    program fits 11 (tests/integration/test_fit_docker.py measures that on each machine)."""
    from harness import matrixfile
    from harness.matrixfile.load import probe_cell

    (tmp_path / "s.py").write_text("def setup(p):\n    return p['batch']\n\n\ndef step(s):\n"
                                   "    pass\n")
    (tmp_path / "m.yaml").write_text(
        "name: m\nruntime: local\ndefaults: {iterations: 20, warmup: 2, heap: quiet}\n"
        "matrix:\n  image: [{name: a, python: python3}]\n  scenario: [s.py]\n")
    [cell] = matrixfile.load(tmp_path / "m.yaml").cells
    assert cell.settings.heap == "quiet"
    probe = probe_cell(cell, "batch", 8)
    assert probe.settings.heap == "stock" and probe.settings.repeats == 0
    assert probe.scenario.params["batch"] == 8 and probe.id == f"{cell.id}.batch8"
