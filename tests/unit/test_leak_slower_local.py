"""A leak that is also slower than its row's baseline, run for real (issue 63 item 8):
three releases of a tiny package, each a wheel installed offline into its own venv by
the local runtime. 1.0 adds a logging handler once; 2.0 adds one on every call (retrying
1.3.5's bug: a NullHandler, a few hundred bytes, kept per call, and every call logs
through all of them, slower than the last); 3.0 keeps a few hundred bytes per call in a
list and is otherwise 1.0. Both later releases leak; 2.0's rounds against 1.0 confirm
it slower too, and its verdict says both; 3.0, at 1.0's speed, claims no slowdown."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import sweepkit

from harness.analysis.rules import TIME_UNDECIDED
from harness.answers.search import free_of
from harness.result.model import CellResult, baseline_numbers, cell_text
from harness.runtimes.local import LocalRuntime

ONCE = '''import logging
_LOG = logging.getLogger("handlers_demo")
_LOG.propagate = False
_LOG.addHandler(logging.NullHandler())


def work():
    _LOG.warning("called")
'''
EVERY_CALL = '''import logging
_LOG = logging.getLogger("handlers_demo")
_LOG.propagate = False


def work():
    _LOG.addHandler(logging.NullHandler())
    _LOG.warning("called")
'''
KEPT = ONCE + '''
_KEPT = []


def keep():
    _KEPT.append(bytearray(240))
'''
RELEASES = {"1.0": ONCE, "2.0": EVERY_CALL, "3.0": KEPT}
SCENARIO = '''
def setup(params):
    import handlers_demo
    return handlers_demo


def step(mod):
    mod.work()
    if hasattr(mod, "keep"):
        mod.keep()
'''


@pytest.fixture
def swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, CellResult]:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version, code in RELEASES.items():
        sweepkit.wheel(wheels, "handlers_demo", version, code)
    for tool in ("UV", "PIP"):
        monkeypatch.setenv(f"{tool}_NO_INDEX", "1")
        monkeypatch.setenv(f"{tool}_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_OFFLINE", "1")
    images = [{"name": f"h{v.replace('.', '')}", "python": sys.executable,
               "pip": [f"handlers_demo=={v}"]} for v in RELEASES]
    path = sweepkit.write_matrix(tmp_path, images, ["handlers.py"], name="handlers",
                                 gpus=None, defaults={"iterations": 3000, "warmup": 100,
                                                      "repeats": 0},
                                 files={"handlers.py": SCENARIO})
    run = sweepkit.sweep_matrix(path, LocalRuntime(tmp_path / "cache"), out=tmp_path / "out")
    return {r.image.label: r for r in run.results.values()}


def test_a_leak_slower_than_its_baseline_says_both_and_one_at_its_speed_only_the_leak(
        swept: dict[str, CellResult]) -> None:
    every, kept = swept["h20"], swept["h30"]
    # GIVEN 1.0 is free of a leak (ok; or, where a busy host stretched its late steps,
    # undecided about its time alone, its memory flat: the CI of 87564ef at a load of
    # ~8, "late steps 1.18x early ... seen in one run") and both later releases leak
    base = swept["h10"]
    assert free_of(base, "leak"), base.reason
    assert base.verdict == "ok" or base.rule in TIME_UNDECIDED, base.reason
    assert every.verdict == kept.verdict == "leak", (every.reason, kept.reason)
    assert every.rule == kept.rule == "leak"
    # THEN the handler per call, slower with every call, is confirmed slower than 1.0 by
    # the rounds run for it, and says so beside its leak: reason, words, stored facts
    vs = every.vs_baseline
    assert vs is not None and vs.confirmation is not None, every.reason
    conf = vs.confirmation
    # (the rounds decide the direction, whichever a busy host's pooled runs suspected)
    assert conf.direction == "slower" and conf.rule == "confirm-slower", conf.reason
    assert "; also slower than h10: steps " in every.reason, every.reason
    assert "baseline (slower in " in cell_text(every), cell_text(every)
    assert every.facts is not None and every.facts.regression
    # AND the leak at 1.0's speed claims no slowdown: no rounds, or (where a busy host
    # made its pooled steps look slower: 1.39x, p=4e-36, in the CI of 44157f7 at a load
    # of ~8) rounds that confirmed none
    assert kept.vs_baseline is not None
    held = kept.vs_baseline.confirmation
    assert held is None or not (held.confirmed and held.direction == "slower"), held
    # (its peak RSS may be said against 1.0's: it holds ~0.9 MiB more, which reads 1.06x
    # quiet and read 1.11x, past `peak_min_ratio`, in a CI beside two busy loops; a fact
    # about its memory, not a time claim)
    assert "slower" not in kept.reason and "slower" not in cell_text(kept), kept.reason
    assert not [p for p in baseline_numbers(kept) if not p.startswith("peak RSS ")], (
        baseline_numbers(kept))
