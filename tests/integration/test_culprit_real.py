"""`harness culprit` on real runtimes: venvs built by pip (local), and hybrid images built
by the engine from two images' RECORDs (docker).

The local test runs docs/culprit.md's demo as pasted (pip's index: multidict's real leak,
aio-libs/multidict#1232, among six package changes); the docker test builds its own two
images offline from harness-test/base:bookworm with hand-made packages (one of which
leaks by design, one only in each image), so the truth is stated here and the engine's
swap is what is tested.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from harness.cli import main
from tests.integration.test_docs_commands import elsewhere, run_as_pasted, scratch

ROOT = Path(__file__).resolve().parents[2]


def answer(out: Path, name: str) -> dict:
    (run,) = (out / name).iterdir()
    (found,) = (run / "culprit").glob("*/culprit.json")
    data: dict = json.loads(found.read_text())
    return data


@pytest.mark.slow
def test_local_culprit_names_multidict_among_six(tmp_path: Path) -> None:
    # docs/culprit.md's demo, pasted in a scratch copy of the repository: two venvs of an
    # aiohttp-like stack, five packages moved and one added, multidict's leak among them
    sweep, culprit = elsewhere(ROOT / "docs/culprit.md", "tests/integration/test_culprit_real.py")
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
LEAKY = {"1.0": "def work(d):\n    d.clear()\n",
         "2.0": "_KEPT = []\n\n\ndef work(d):\n    _KEPT.append(dict(d))\n    d.clear()\n"}
SCRIPT = ("def setup(params):\n    import leaky\n    return leaky\n\n\n"
          "def step(leaky):\n    leaky.work({str(i): 'v' * 200 for i in range(20)})\n")


def site(root: Path, packages: dict[str, tuple[str, str]]) -> None:
    """A dist-packages tree: each package a module and its dist-info with a RECORD."""
    for name, (version, code) in packages.items():
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(f"__version__ = {version!r}\n{code}")
        info = root / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\n"
                                       f"Version: {version}\n")
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n{info.name}/METADATA,,\n"
                                     f"{info.name}/RECORD,,\n")


def image(tmp: Path, tag: str, packages: dict[str, tuple[str, str]]) -> None:
    ctx = tmp / tag.replace(":", "-")
    site(ctx / "site", packages)
    (ctx / "Dockerfile").write_text("FROM harness-test/base:bookworm\n"
                                    "COPY site/ /usr/local/lib/python3.11/dist-packages/\n")
    subprocess.run(["docker", "build", "-q", "--network", "none", "-t", tag, str(ctx)],
                   check=True, capture_output=True)


@pytest.mark.docker
@pytest.mark.slow
def test_docker_culprit_swaps_record_files(tmp_path: Path) -> None:
    repo = f"harness-culprit-test-{uuid.uuid4().hex[:8]}"
    others = {"alpha": ("1.0", "2.0"), "beta": ("3.1", "3.2"), "gamma": ("0.1", None),
              "delta": (None, "5.0")}
    good = {n: (g, "") for n, (g, _) in others.items() if g} | {"leaky": ("1.0",
                                                                          LEAKY["1.0"])}
    bad = {n: (b, "") for n, (_, b) in others.items() if b} | {"leaky": ("2.0",
                                                                         LEAKY["2.0"])}
    image(tmp_path, f"{repo}:g", good)
    image(tmp_path, f"{repo}:b", bad)
    made: list[str] = []
    try:
        (tmp_path / "loop.py").write_text(SCRIPT)
        (tmp_path / "m.yaml").write_text(
            "name: dcul\nruntime: docker\n"
            "defaults: {iterations: 300, warmup: 30, sample_every: 10, timeout: 5m}\n"
            f"matrix:\n  image:\n    - {{name: g, ref: '{repo}:g'}}\n"
            f"    - {{name: b, ref: '{repo}:b'}}\n  gpu: [none]\n  scenario: [loop.py]\n")
        out = tmp_path / "r"
        assert main(["sweep", str(tmp_path / "m.yaml"), "--out", str(out), "-q"]) == 1
        assert main(["culprit", str(out / "dcul"), "-q"]) == 1
        data = answer(out, "dcul")
        made = sorted({p["image"] for p in data["probes"]})
        assert data["status"] == "found", data["sentence"]
        assert [c["name"] for c in data["answer"]] == ["leaky"]
        undo = next(p for p in data["probes"] if p["side"] == "undo"
                    and p["changes"] == ["leaky"])
        # the kept hybrid is B with leaky's files from G: its own module says 1.0
        ran = subprocess.run(["docker", "run", "--rm", "--network", "none", undo["image"],
                              "python3", "-c", "import leaky, alpha; print(leaky.__version__,"
                              " alpha.__version__)"], capture_output=True, text=True,
                             check=True)
        assert ran.stdout.split() == ["1.0", "2.0"]
        labels = subprocess.run(["docker", "image", "inspect", "-f",
                                 "{{json .Config.Labels}}", undo["image"]],
                                capture_output=True, text=True, check=True)
        assert json.loads(labels.stdout)["harness.culprit.swapped"] == "leaky 1.0"
    finally:
        subprocess.run(["docker", "rmi", "-f", f"{repo}:g", f"{repo}:b", *made],
                       capture_output=True)
