"""Interleaved confirmation rounds record the GPU's SM clock beside the CPU speed, and
the agent's GPU activity fields are checked on the way in (GIVEN a fake sweep or agent
lines, THEN the stored rounds and the Series)."""

from __future__ import annotations

import json

from fakeruntime import Behaviour
from sweepkit import DEFAULTS, FakeSweep

from harness.protocol.ingest import parse_lines


def test_rounds_record_each_runs_sm_clock(fake_sweep: FakeSweep) -> None:
    # GIVEN v2 2x slower than v1, its GPU held at 1410 MHz where v1's ran at 1980
    table = {"v1": Behaviour(sm_mhz=1980), "v2": Behaviour(step_s=0.002, sm_mhz=1410)}
    outcome = fake_sweep(["v1", "v2"], lambda c: table[c.image.label], name="gpuclock",
                         gpus=["0"], defaults={**DEFAULTS, "iterations": 400, "warmup": 20})
    lines = outcome.said
    res = outcome.results["v2.gpu0.loop"]
    assert res.verdict == "regression"
    conf = res.vs_baseline.confirmation if res.vs_baseline else None
    assert conf is not None and conf.rounds
    # THEN every round has both runs' clocks, stored and said
    assert {(r.base_sm_mhz, r.other_sm_mhz) for r in conf.rounds} == {(1980.0, 1410.0)}
    stored = json.loads((outcome.store.root / "cells" / "v2.gpu0.loop" / "result.json")
                        .read_text())
    first = stored["vs_baseline"]["confirmation"]["rounds"][0]
    assert (first["base_sm_mhz"], first["other_sm_mhz"]) == (1980.0, 1410.0)
    assert any("GPU clock 1980 / 1410 MHz" in line for line in lines)


def _sample(**extra: object) -> bytes:
    rec = {"type": "sample", "src": "step", "phase": "measure", "i": 10, "t": 0.1,
           "dt": [0.01] * 10, **extra}
    return (json.dumps(rec) + "\n").encode()


def test_gpu_activity_fields_are_checked_and_old_samples_load() -> None:
    header = (json.dumps({"type": "header", "schema": 1}) + "\n").encode()
    good = parse_lines([header, _sample(gpu_util=97, sm_mhz=1980, clk_reasons=4),
                        _sample()])
    assert len(good.samples) == 2 and not good.problems
    cols = good.cols.gpu
    assert cols is not None and cols["sm_mhz"][0] == 1980.0
    assert str(cols["sm_mhz"][1]) == "nan"
    assert parse_lines([header, _sample()]).cols.gpu is None
    for bad in ({"gpu_util": 101}, {"sm_mhz": -1}, {"clk_reasons": 1.5},
                {"gpu_util": True}):
        series = parse_lines([header, _sample(**bad)])
        key = next(iter(bad))
        assert not series.samples and key in series.problems[0], series.problems
