"""`harness culprit` on real runtimes: venvs built by pip (local), and hybrid images built
by the engine from two images' RECORDs (docker).

Both run docs/culprit.md's demo as pasted (multidict's real leak, aio-libs/multidict#1232,
among six package changes, its truth measured by hand on the page): the local test in
venvs, the docker test in two images built offline from harness-test/base:bookworm with
pip's own RECORDs, whose kept hybrid is then run to read the files the engine swapped.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_docs_commands import Block, elsewhere, run_as_pasted, scratch

ROOT = Path(__file__).resolve().parents[2]
THIS = "tests/integration/test_culprit_real.py"


def answer(out: Path, name: str) -> dict:
    (run,) = (out / name).iterdir()
    (found,) = (run / "culprit").glob("*/culprit.json")
    data: dict = json.loads(found.read_text())
    return data


@pytest.mark.slow
def test_local_culprit_names_multidict_among_six(tmp_path: Path) -> None:
    # docs/culprit.md's demo, pasted in a scratch copy of the repository: two venvs of an
    # aiohttp-like stack, five packages moved and one added, multidict's leak among them
    sweep, culprit = [b for b in elsewhere(ROOT / "docs/culprit.md", THIS) if not b.needs]
    repo = scratch(tmp_path)
    run_as_pasted(sweep, repo)
    run_as_pasted(culprit, repo)
    data = answer(repo / "reports", "culprit-demo")
    assert data["status"] == "found"
    assert [c["name"] for c in data["answer"]] == ["multidict"]
    by = {(p["side"], tuple(p["changes"])): p for p in data["probes"]}
    # (the undo probe is read good: `ok`, or on a busy host undecided on its steps alone
    # with its memory stable: culprit.plan.outcome_of)
    assert by[("undo", ("multidict",))]["outcome"] == "good", by[("undo", ("multidict",))]
    assert by[("apply", ("multidict",))]["verdict"] == "leak"


# ---------------------------------------------------------------- docker
@pytest.mark.docker
@pytest.mark.slow
def test_docker_culprit_swaps_record_files(tmp_path: Path) -> None:
    # docs/culprit.md's demo on Docker, pasted in a scratch copy: the two stacks built as
    # images on harness-test/base:bookworm with pip's own RECORDs, swept, then searched
    # with hybrid images the engine builds offline
    build, sweep, culprit = docker_blocks()
    repo = scratch(tmp_path)
    made: list[str] = []
    try:
        for block in (build, sweep, culprit):
            run_as_pasted(block, repo)
        data = answer(repo / "reports", "culprit-docker")
        made = sorted({p["image"] for p in data["probes"]
                       if str(p["image"]).startswith("harness-culprit/")})
        assert data["status"] == "found", data["sentence"]
        assert [c["name"] for c in data["answer"]] == ["multidict"]
        undo = next(p for p in data["probes"] if p["side"] == "undo"
                    and p["changes"] == ["multidict"])
        # the kept hybrid is B with multidict's files from G, yarl still B's (the page
        # says it printed `6.4.4 1.20.1`)
        ran = subprocess.run(["docker", "run", "--rm", "--network", "none", undo["image"],
                              "python3", "-c", "import multidict, yarl; print("
                              "multidict.__version__, yarl.__version__)"],
                             capture_output=True, text=True, check=True)
        assert ran.stdout.split() == ["6.4.4", "1.20.1"]
        labels = subprocess.run(["docker", "image", "inspect", "-f",
                                 "{{json .Config.Labels}}", undo["image"]],
                                capture_output=True, text=True, check=True)
        assert json.loads(labels.stdout)["harness.culprit.swapped"] == "multidict 6.4.4"
    finally:
        if made:
            subprocess.run(["docker", "rmi", "-f", *made], capture_output=True)


def docker_blocks() -> list[Block]:
    """docs/culprit.md's Docker blocks this file runs: the build, the sweep, culprit."""
    found = [b for b in elsewhere(ROOT / "docs/culprit.md", THIS) if "docker" in b.needs]
    assert len(found) == 3, [b.text for b in found]
    return found
