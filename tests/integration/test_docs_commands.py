"""Every shell command in README.md and docs/*.md that a user would paste is run here.

A fenced ```sh block is a command a user pastes. The HTML comment on the line before it
(invisible on the rendered page) says how to check it:

    <!-- docs-test: exit=1 -->                       runs, must exit 1 (default 0)
    <!-- docs-test: exit=0|1 -->                     runs, must exit 0 or 1 (a sweep whose
                                                     timing verdicts a busy machine may move)
    <!-- docs-test: needs=docker exit=0 -->          runs where the marked engine is
    <!-- docs-test: skip=gpu (why, in words) -->     not run here; the reason is one of SKIPS
    <!-- docs-test: needs=docker skip=elsewhere (tests/integration/test_x.py ...) -->
                                                     run, as written and with the exit codes
                                                     given before the skip, by the test file
                                                     named, which also reads what it made

The blocks of one file run in order, in one scratch copy of the repository (a later
block may read what an earlier one wrote, as a reader following the page would), never
in the checkout itself. A block with no comment runs and must exit 0, so a new command
in the docs is checked unless someone says why not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pluginkit import others_off

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# The only reasons a pasted command is not run by this test.
SKIPS = {
    "gpu": "needs an NVIDIA GPU host (and its NGC images)",
    "registry": "needs a container registry on the network",
    "ci": "is the command that runs this test suite",
    "minutes": "builds images for minutes; what it shows is tested on smaller images "
               "(tests/integration/test_culprit_real.py)",
    "elsewhere": "is run as written by the test file its comment names, which then checks "
                 "the results it made (one run for both, not one each)",
}
NEEDS = {"docker", "slurm", "podman"}

COMMENT = re.compile(r"<!--\s*docs-test:(?P<body>.*?)-->")
FENCE = re.compile(r"^```sh\s*$")


@dataclass
class Block:
    path: Path
    line: int
    text: str
    exits: tuple[int, ...] = (0,)
    skip: str | None = None
    needs: set[str] = field(default_factory=set)
    why: str = ""       # a skip's words after its reason: "(...)"

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The ```sh blocks of a Markdown file with their docs-test settings.

    Raises:
        ValueError: a docs-test comment with an unknown key or skip reason.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        block = Block(path, start + 1, "\n".join(lines[start + 1:j]))
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        m = COMMENT.search(lines[k]) if k >= 0 else None
        if m:
            for word in m["body"].split():
                key, _, value = word.partition("=")
                if key == "exit":
                    block.exits = tuple(int(v) for v in value.split("|"))
                elif key == "skip":
                    if value not in SKIPS:
                        raise ValueError(f"{block.where}: skip={value}: not a reason this "
                                         f"test accepts ({', '.join(SKIPS)})")
                    block.skip = value
                    block.why = m["body"].split(word, 1)[1].strip()
                elif key == "needs":
                    if value not in NEEDS:
                        raise ValueError(f"{block.where}: needs={value}: allowed values: "
                                         f"{', '.join(sorted(NEEDS))}")
                    block.needs.add(value)
                elif key and not key.startswith("("):
                    if block.skip is None:
                        raise ValueError(f"{block.where}: docs-test: unknown key {key!r}")
                    break  # the skip's reason, in words
        found.append(block)
        i = j + 1
    return found


def test_every_block_is_read() -> None:
    """The parser sees every ```sh fence of the docs, and each one's settings parse."""
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        assert len(blocks(path)) == len(re.findall(r"^```sh\s*$", text, re.M)), path


def test_skips_are_few() -> None:
    """Commands not run are the exception (a block run `elsewhere`, as pasted, is run)."""
    every = [b for p in DOCS for b in blocks(p)]
    run = [b for b in every if b.skip in (None, "elsewhere")]
    assert every, "no ```sh block found in README.md or docs/"
    assert len(run) >= len(every) - len(run), [b.where for b in every if b not in run]


def test_a_block_run_elsewhere_is_run_there() -> None:
    """A block skipped as `elsewhere` names the test file that runs it, and that file reads
    the block from this page (`blocks` or `elsewhere`), so an edit of the commands reaches
    the test."""
    for path in DOCS:
        for block in blocks(path):
            if block.skip != "elsewhere":
                continue
            named = re.findall(r"tests/[\w/]+\.py", block.why)
            assert named, f"{block.where}: skip=elsewhere names no tests/...py file"
            for name in named:
                text = (ROOT / name).read_text(encoding="utf-8")
                assert str(path.relative_to(ROOT)) in text and (
                    "blocks(" in text or "elsewhere(" in text), (
                    f"{block.where}: {name} does not read its commands from "
                    f"{path.relative_to(ROOT)}")


def scratch(tmp: Path) -> Path:
    """A copy of the repository without its results, caches and VCS data."""
    dest = tmp / "repo"
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
        ".git", "reports", ".venv", "__pycache__", "*.egg-info", ".mypy_cache",
        ".ruff_cache", ".pytest_cache"))
    return dest


def _others_pytest_plugins() -> str:
    """`-p no:NAME` for each pytest plugin installed here other than harness's: a pasted
    `python3 -m pytest ...` (docs/pytest.md) loads harness's plugin through its entry
    point, as a user's does, without the suite's own (hypothesis alone imports in ~0.5
    CPU-s a run), which a user who installed harness need not have."""
    return " ".join(others_off())


# The files whose commands take about a minute in CI (seconds, quiet), so they start
# before the shorter ones (tests/conftest.py's `_weight`); the others weigh a slow test's
# default.
SECONDS = {"README.md": 50}


def _marks(path: Path) -> list[pytest.MarkDecorator]:
    needs = {n for b in blocks(path) if b.skip is None for n in b.needs}
    seconds = SECONDS.get(str(path.relative_to(ROOT)))
    slow = pytest.mark.slow(seconds=seconds) if seconds else pytest.mark.slow
    return [getattr(pytest.mark, n) for n in sorted(needs)] + [slow]


def docs_env() -> dict[str, str]:
    """The environment the docs' commands run in (here and where a block is run
    `elsewhere`)."""
    # PIP_COMPILE=0: pip installs without byte-compiling what it installs (`--no-compile`;
    # the modules a command imports are compiled when first imported): README's install
    # into a fresh venv spent about half its CPU time compiling NumPy's and SciPy's .py
    # files, which no command here imports all of. What is installed is the same.
    # PYTEST_ADDOPTS: see _others_pytest_plugins.
    return {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "PYTHONPATH": str(ROOT),
            "PIP_COMPILE": "0", "PYTEST_ADDOPTS": " ".join(filter(None, [
                os.environ.get("PYTEST_ADDOPTS"), _others_pytest_plugins()]))}


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(ROOT)), marks=_marks(p))
                                  for p in DOCS if any(b.skip is None for b in blocks(p))])
def test_commands_run_as_documented(path: Path, tmp_path: Path) -> None:
    """Each runnable block of the file, in order, exits with the code it documents."""
    repo = scratch(tmp_path)
    for block in blocks(path):
        if block.skip is None:
            run_as_pasted(block, repo)


def run_as_pasted(block: Block, repo: Path) -> subprocess.CompletedProcess[str]:
    """`block` run as a reader pastes it (bash, in `repo`, a `scratch` copy, with
    `docs_env`); it must exit as the page says, without a traceback."""
    if shutil.which("harness") is None:
        pytest.fail("no `harness` on PATH: install the package (pip install -e .) first")
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=repo,
                          env=docs_env(), capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)
    assert done.returncode in block.exits, (
        f"{block.where}: `{block.text}` exited {done.returncode}, the docs say "
        f"{' or '.join(map(str, block.exits))}\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}")
    assert "Traceback (most recent call last)" not in done.stderr, block.where
    return done


def elsewhere(path: Path, test_file: str) -> list[Block]:
    """The blocks of `path` that the docs test leaves to `test_file` (`skip=elsewhere`,
    naming it), in the page's order."""
    found = [b for b in blocks(path) if b.skip == "elsewhere" and test_file in b.why]
    assert found, f"{path.relative_to(ROOT)} leaves no block to {test_file}"
    return found


def test_readme_is_a_short_guide_with_one_exit_code_table() -> None:
    """The README stays a guide (the rest lives in docs/), with one table of exit codes."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert len(re.findall(r"^#+ Exit codes", text, re.M)) == 1
    assert len(re.findall(r"^\| code \| meaning \|", text, re.M)) == 1
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).is_file(), f"README links to {link}, which is not there"
