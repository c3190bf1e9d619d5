"""Every benchmark runs in CI: each `benchmarks/*.py` has a `--quick` mode (seconds), run
here as a subprocess, so a benchmark that breaks fails the suite instead of rotting
unseen. A benchmark that needs Docker or Slurm carries that marker (CI requires both).

`--quick` is a smoke run: it fails on an error, not on a goal that a few runs on a busy
machine cannot check (those benchmarks say so and exit 0); goals that do not depend on
the machine (the bisect and fit planners' probe bounds) are still checked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

# file -> what it needs beyond this interpreter (a pytest marker each)
QUICK: dict[str, tuple[str, ...]] = {
    "aa_noise.py": (),
    "aa_rounds.py": (),
    "aa_sweeps.py": (),
    "agent_overhead.py": (),
    "analysis_speed.py": (),
    "attribution_overhead.py": (),
    "bisect_cost.py": (),
    "busy_rounds.py": (),
    "cell_overhead.py": ("docker",),
    "check_cost.py": (),
    "codec_speed.py": (),
    "corpus.py": (),
    "culprit_cost.py": (),
    "detection.py": (),
    "fill_vs_leak.py": (),
    "fit_probes.py": (),
    "late_onset.py": (),
    "live_full.py": (),
    "live_gpu_replay.py": (),
    "load_verdicts.py": (),
    "ms_steps.py": (),
    "near_floor.py": (),
    "one_decision.py": (),
    "plugin_cost.py": (),
    "plugin_suite.py": (),
    "plugin_toolz.py": (),
    "plugin_vs_memray.py": (),
    "rounds_cost.py": (),
    "redecide.py": (),
    "scale.py": (),
    "scheduler.py": (),
    "seeds_answer.py": ("docker",),
    "sequential_fpr.py": (),
    "slurm_overhead.py": ("slurm",),
    "time_truth.py": (),
    "time_verdicts.py": (),
    "user_paths.py": (),
    "venv_build.py": (),
    "vs_psleak.py": (),
}


def test_every_benchmark_is_run_quick_here() -> None:
    # a new benchmark must be added to QUICK (and have --quick), a removed one taken out
    on_disk = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    assert on_disk == sorted(QUICK), (
        "benchmarks/*.py and QUICK in tests/integration/test_benchmarks_quick.py differ: "
        f"only on disk {sorted(set(on_disk) - set(QUICK))}, "
        f"only in QUICK {sorted(set(QUICK) - set(on_disk))}")
    lacking = [name for name in on_disk
               if '"--quick"' not in (BENCHMARKS / name).read_text()]
    assert lacking == [], f"these benchmarks have no --quick mode: {lacking}"


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[getattr(pytest.mark, m) for m in needs], id=name)
    for name, needs in QUICK.items()])
def test_benchmark_quick_runs(name: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, str(BENCHMARKS / name), "--quick"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name} --quick ran past {exc.timeout:.0f} s: it is meant to take "
                    "seconds", pytrace=False)
    said = f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{name} --quick exited {done.returncode}\n{said}"
    assert "Traceback (most recent call last)" not in done.stdout + done.stderr, said
    assert done.stdout.strip(), f"{name} --quick printed nothing\n{said}"
