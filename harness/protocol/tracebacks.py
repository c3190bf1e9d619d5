"""Where a scenario raised: the frames of the Python traceback the agent's end record
carries (`end.error.traceback`), the agent's own frames left out.

One reader for the verdict's reason ("at boom.py:8 in step") and the terminal's last
frames under the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Frame", "frames", "raised_at"]

FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\s*$')


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str
    code: str = ""       # the source line Python printed under it, if any

    def __str__(self) -> str:
        head = f'File "{self.path}", line {self.line}, in {self.func}'
        return f"{head}: {self.code}" if self.code else head


def _agents(path: str) -> bool:
    return "/harness/agent/" in path or path.endswith(("/agent.py", "<string>"))


def frames(traceback: str) -> list[Frame]:
    """The traceback's frames, outermost first, without the agent's own (its run loop,
    the wrapper that starts it)."""
    lines = traceback.splitlines()
    out: list[Frame] = []
    for i, text in enumerate(lines):
        m = FRAME.match(text)
        if m is None or _agents(m.group(1)):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        # The code line is indented under its frame; the closing "Error: message" is not.
        code = nxt.strip() if nxt.startswith("  ") and not FRAME.match(nxt) else ""
        out.append(Frame(m.group(1), int(m.group(2)), m.group(3), code))
    return out


def raised_at(traceback: str) -> str | None:
    """"loop.py:6 in step": the innermost frame outside the agent, file name only."""
    found = frames(traceback)
    if not found:
        return None
    last = found[-1]
    return f"{last.path.rsplit('/', 1)[-1]}:{last.line} in {last.func}"
