"""Issue 38 item 5: every Markdown file of the repository renders as written: its fences
open and close where its author meant (docs/commands.md had a stray fence, and from
"Reports and re-analysis" down the page rendered as code; the docs test, which reads
```sh blocks, did not notice)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.mdfences import blocks, unmatched

ROOT = Path(__file__).resolve().parents[2]


def markdown_files() -> list[Path]:
    """The repository's Markdown files: those git tracks, else every one outside hidden
    folders."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", "*.md"], cwd=ROOT,
                                capture_output=True, check=True).stdout.decode()
        found = [ROOT / name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        found = [p for p in ROOT.rglob("*.md")
                 if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]
    return sorted(p for p in found if p.is_file())


def test_the_repository_has_its_markdown_files() -> None:
    names = {str(p.relative_to(ROOT)) for p in markdown_files()}
    assert {"README.md", "ARCHITECTURE.md", "docs/commands.md"} <= names


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_is_matched(path: Path) -> None:
    assert unmatched(path.read_text(encoding="utf-8")) == [], path.relative_to(ROOT)


STRAY = """\
## One

```
a block
```

## Two
stray line
```

prose that renders as code

```sh
harness sweep m.yaml
```
"""


def test_a_stray_fence_and_an_open_block_are_found() -> None:
    assert unmatched(STRAY) == [
        "line 13: ```sh is inside the block opened at line 9, so it shows as code: a fence "
        "before it is stray, or one is missing"]
    assert unmatched("text\n~~~python\nx = 1\n") == [
        "line 2: the block opened here (~~~python) is never closed"]


def test_fences_as_written_are_not_faults() -> None:
    shown = "````markdown\n```sh\nharness report DIR\n```\n````\n"
    assert unmatched(shown) == []
    assert [(b.line, b.end, b.info) for b in blocks(shown)] == [(1, 5, "markdown")]
    assert unmatched("```text\na\n```\n\n~~~\n```\n~~~\n") == []
    assert unmatched("Use ```code``` inline.\n") == []
