"""Fenced code blocks of a Markdown file as a reader's renderer sees them (CommonMark's
rule: a fence of three or more backticks or tildes opens a block, which only a fence of
the same character, at least as long and with nothing after it, closes), and the fences
that cannot be what their author meant."""

from __future__ import annotations

import re
from dataclasses import dataclass

FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    line: int           # the opening fence's line, from 1
    end: int | None     # the closing fence's line; None: open to the end of the file
    fence: str          # the opening fence: "```", "~~~~", ...
    info: str           # what follows it ("sh", "text", "")


def blocks(text: str) -> list[Block]:
    """Every fenced block, in order."""
    out: list[Block] = []
    opened: Block | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m is None:
            continue
        fence, info = m["fence"], m["info"].strip()
        if opened is None:
            if fence[0] == "`" and "`" in info:
                continue        # an inline code span, not a fence
            opened = Block(n, None, fence, info)
        elif fence[0] == opened.fence[0] and len(fence) >= len(opened.fence) and not info:
            out.append(Block(opened.line, n, opened.fence, opened.info))
            opened = None
    if opened is not None:
        out.append(opened)
    return out


def unmatched(text: str) -> list[str]:
    """The fences a reader would not see as meant, each with its line: a block left
    open to the end of the file, and a fence with an info string (```sh) inside a block,
    which a renderer shows as code where it was meant to open a block of its own (a
    fence before it is stray, or one closing the block is missing). A shorter fence
    inside a longer one (```` around ```) is the way to show a fence, and is not one."""
    faults = []
    lines = text.splitlines()
    for b in blocks(text):
        if b.end is None:
            faults.append(f"line {b.line}: the block opened here ({b.fence}{b.info}) is "
                          "never closed")
            continue
        for n in range(b.line + 1, b.end):
            m = FENCE.match(lines[n - 1])
            if m is not None and m["info"].strip() and m["fence"][0] == b.fence[0] \
                    and len(m["fence"]) >= len(b.fence):
                faults.append(f"line {n}: {lines[n - 1].strip()} is inside the block opened "
                              f"at line {b.line}, so it shows as code: a fence before it is "
                              "stray, or one is missing")
    return faults
