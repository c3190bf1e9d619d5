"""`--help` text that keeps its layout (examples in two columns, paragraphs as written)
and fits the terminal: argparse's RawDescriptionHelpFormatter printed the examples and
the paragraphs of a command's epilog as written, up to 95 columns, which an 80-column
terminal broke mid-word ("re-render the newest run's repo" / "rts")."""

from __future__ import annotations

import argparse
import re
import textwrap

# "  harness sweep m.yaml --resume      finish an interrupted sweep": an example's
# command, two or more spaces, what it does
EXAMPLE = re.compile(r"^(?P<lead>\s+)(?P<cmd>\S(?:.*?\S)?)(?P<gap>\s{2,})(?P<said>\S.*)$")
NARROWEST = 20      # a description column narrower than this goes under its command


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False)


def _row(lines: list[str], width: int) -> list[str]:
    """An indented row (an example, an exit code) and the lines under it indented
    deeper (its description's continuation), fitted to `width`."""
    if max(len(line) for line in lines) <= width:
        return lines
    head, more = lines[0], [line.strip() for line in lines[1:]]
    found = EXAMPLE.match(head)
    if found is not None:       # "  CMD   what it does" (and what it does, continued)
        column = len(head) - len(found["said"])
        said, lead, cmd = " ".join([found["said"], *more]), found["lead"], found["cmd"]
    elif more:                  # what it does, continued at a column of its own
        column, lead = _indent(lines[1]), head[: _indent(head)]
        if len(head) > column and head[column - 1] == " " and head[:column].strip():
            # "  130 interrupted: ..." over "      are kept ...": one space apart
            said, cmd = " ".join([head[column:], *more]), head[:column].strip()
        else:                   # "  CMD" with what it does on the lines under it
            said, cmd = " ".join(more), head.strip()
    else:                       # a long line alone
        return _wrap(head.strip(), width, head[: _indent(head)], head[: _indent(head)] + "  ")
    if width - column >= NARROWEST and len(lead) + len(cmd) < column:
        return _wrap(said, width, (lead + cmd).ljust(column), " " * column)
    under = " " * (len(lead) + 4)
    return [*_wrap(cmd, width, lead, lead + "  "), *_wrap(said, width, under, under)]


def fit_lines(text: str, width: int) -> list[str]:
    """`text` laid out as written where it fits `width`; else each indented row (an
    example, an exit code: its words in their column, or under it where the column
    would be narrower than `NARROWEST`) and each paragraph with a line too long
    refilled at its indent."""
    out: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if not block:
            return
        if block[0].startswith(" "):
            out.extend(_row(block, width))
        elif max(len(line) for line in block) > width:
            out.extend(_wrap(" ".join(line.strip() for line in block), width, "", ""))
        else:
            out.extend(block)
        block.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            out.append("")
        elif line.startswith(" ") and block and block[0].startswith(" ") and \
                _indent(line) > _indent(block[0]):
            block.append(line)          # under the row above: its continuation
        elif line.startswith(" ") or (block and block[0].startswith(" ")):
            flush()
            block.append(line)
        else:
            block.append(line)          # prose: the paragraph goes on
    flush()
    return out


class FittedHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The description and epilog as written, fitted to the terminal's width."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line if line else line
                         for line in fit_lines(text, max(width, 2 * NARROWEST)))
