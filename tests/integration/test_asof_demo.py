"""The `as_of:` demo (docs/asof.md) against the real package index: `aiohttp` unpinned,
resolved on three days, then `harness day` between the good and the bad one.

What the index held on a past day never changes, so the truth is stated here: as of
2025-05-15 aiohttp pulls multidict 6.4.3, as of 2025-07-15 6.6.3 (MultiDict.pop() leaks,
aio-libs/multidict#1232), as of 2025-09-15 6.6.4. Skipped, with the reason, where the
index cannot be reached.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import EXIT_BAD_INPUT
from harness.runtimes import resolver
from tests.integration.test_docs_commands import elsewhere, run_as_pasted, scratch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache; skips where uv or the index is missing."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    if resolver.uv_bin() is None:
        pytest.skip("uv is not installed (pip install uv)")
    try:
        resolver.resolve(["aiohttp"], "2025-05-15", sys.executable, sys.version, cache,
                         "probe")
    except resolver.Unreachable as exc:
        pytest.skip(f"the package index cannot be reached: {exc}")
    return cache


@pytest.mark.slow
def test_the_demo_finds_the_day_multidict_went_bad(index: Path, tmp_path: Path) -> None:
    # docs/asof.md's three commands, pasted in order in a scratch copy of the repository
    sweep, day_cmd, cause_cmd = elsewhere(ROOT / "docs/asof.md",
                                          "tests/integration/test_asof_demo.py")
    repo = scratch(tmp_path)
    run_as_pasted(sweep, repo)
    out = repo / "reports"
    (run,) = (out / "asof-aiohttp").iterdir()
    cells = json.loads((run / "results.json").read_text())["cells"]
    pins = {c["image"]["label"]: c["image"]["labels"]["pins"] for c in cells.values()}
    assert "multidict==6.4.3" in pins["aiohttp@2025-05-15"].split()
    assert "multidict==6.6.3" in pins["aiohttp@2025-07-15"].split()
    assert "multidict==6.6.4" in pins["aiohttp@2025-09-15"].split()
    verdicts = {c["image"]["label"]: c["verdict"] for c in cells.values()}
    assert verdicts["aiohttp@2025-07-15"] == "leak", verdicts
    done = run_as_pasted(day_cmd, repo)
    code, said = done.returncode, done.stdout
    (answer,) = run.glob("day/*/day.json")
    day = json.loads(answer.read_text())
    # multidict 6.5.1, the first leaking release, reached the index on 2025-06-24: every
    # answer, whole or stopped by a probe a busy machine left undecided (exit 4),
    # brackets that day.
    assert day["last_good"] <= "2025-06-24" < "2025-06-25" <= day["first_bad"], said
    assert code == (1 if day["found"] else 4), said
    if not day["found"]:
        assert day["untestable"] and "ran untestable" in said
        return
    # The bad day's resolution holds a multidict of the leaking range, the good day's one
    # before it; the change is named with its upload time, which falls on the good day.
    moved = {c["name"]: c for c in day["changes"]}
    assert moved["multidict"]["bad"].startswith(("6.5.", "6.6.")), moved
    assert not moved["multidict"]["good"].startswith(("6.5.", "6.6.")), moved
    uploaded = moved["multidict"]["uploaded"]
    assert uploaded is None or uploaded.startswith(day["last_good"]), (uploaded, day)
    if (moved["multidict"]["good"], moved["multidict"]["bad"]) == ("6.4.4", "6.5.1"):
        # 6.5.0, between them, is yanked: no day resolves to it, and the answer says so
        assert [v for v, _ in moved["multidict"]["yanked"]] == ["6.5.0"], moved
        assert "passes over 6.5.0 (yanked: " in said, said
    assert day["probes"] < day["resolutions"] < 61     # days between 05-15 and 07-15
    assert f"went bad between {day['last_good']} and {day['first_bad']}" in said

    # The whole journey on the same run: the day's probes and the sweep's cells are
    # reused, culprit swaps only what changed between the two days (two probes, proved
    # both ways), and the summary's workaround stays below the first bad day's version.
    said = run_as_pasted(cause_cmd, repo).stdout
    cause = json.loads((run / "cause" / "cpu.multidict_pop.json").read_text())
    summary = cause["summary"]
    assert summary.startswith(f"went bad between {day['last_good']} and "
                              f"{day['first_bad']}: multidict "), summary
    culprit = json.loads((run / "culprit" / "cpu.multidict_pop" / "culprit.json").read_text())
    assert [c["name"] for c in culprit["answer"]] == ["multidict"], culprit
    assert len(culprit["probes"]) == 2, culprit
    # Only measured versions (issue 51): the last good day's and the fixed day's.
    good, bad = moved["multidict"]["good"], moved["multidict"]["bad"]
    assert (f"Workaround: multidict=={good} or multidict==6.6.4 (both measured good; no "
            f"release between {good} and {bad} was tested)") in summary, summary
    assert "at multidict_pop.py:" in summary, summary
    assert "fixed from 2025-09-15" in summary, summary


def test_a_day_before_the_package_existed_is_named(index: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    (tmp_path / "s.py").write_text("def setup(p):\n    return 1\ndef step(s):\n    pass\n")
    (tmp_path / "m.yaml").write_text(
        "name: early\nruntime: local\nmatrix:\n"
        "  image: [{name: app, pip: [aiohttp], as_of: [2012-01-03, 2025-05-15]}]\n"
        "  scenario: [s.py]\n")
    code = main(["sweep", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "r")])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code == EXIT_BAD_INPUT, text
    assert "app@2012-01-03: aiohttp cannot be resolved as of 2012-01-03" in text
    assert "fix: start `as_of:` on a day after the packages were published" in text
    assert "Traceback" not in text
    assert not (tmp_path / "r" / "early").exists() or not list(
        (tmp_path / "r" / "early").glob("*/cells/*/result.json"))


def test_pips_upload_time_option_resolves_as_uv_does(index: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Where uv is not wanted (HARNESS_VENV_TOOL=pip), pip's --uploaded-prior-to
    resolves; uv's answer for the same day is the oracle."""
    uv = resolver.uv_bin()
    assert uv is not None
    env = tmp_path / "newpip"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(env)], check=True)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(env / "bin" / "python"),
                    "pip>=26"], check=True)
    python = str(env / "bin" / "python")
    version = subprocess.run([python, "-c", "import sys;print(sys.version)"], check=True,
                             capture_output=True, text=True).stdout.strip()
    by_uv = resolver.resolve(["aiohttp"], "2025-07-15", python, version, tmp_path / "a", "u")
    monkeypatch.setenv(resolver.TOOL_ENV, "pip")
    by_pip = resolver.resolve(["aiohttp"], "2025-07-15", python, version, tmp_path / "b", "p")
    assert by_pip == by_uv
    assert "multidict==6.6.3" in by_pip
    with pytest.raises(resolver.TooEarly, match="as of 2012-01-03"):
        resolver.resolve(["aiohttp"], "2012-01-03", python, version, tmp_path / "b", "p")
