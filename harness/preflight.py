"""Checks before the first cell: what can be known on the host is not learnt from a
container per image.

`compile_scenarios` compiles every scenario file with the host's Python: a syntax error
is the user's input (exit 2, file:line), not a crash to report against every image.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harness.errors import InputError
from harness.spec.model import Cell


def compile_scenarios(cells: Iterable[Cell]) -> None:
    """Compile each distinct scenario script once.

    Raises:
        InputError: the first file that does not read or compile, as file:line: message.
    """
    problems: list[str] = []
    seen: set[Path] = set()
    for cell in cells:
        script = cell.scenario.script
        if script in seen:
            continue
        seen.add(script)
        try:
            source = script.read_bytes()
        except OSError as exc:
            problems.append(f"{script}: cannot read the scenario: {exc.strerror}")
            continue
        try:
            compile(source, str(script), "exec", dont_inherit=True)
        except SyntaxError as exc:
            line = f":{exc.lineno}" if exc.lineno else ""
            text = (exc.text or "").rstrip()
            where = f"\n    {text.strip()}" if text else ""
            problems.append(f"{script}{line}: {type(exc).__name__}: {exc.msg}{where}")
        except ValueError as exc:  # NUL bytes
            problems.append(f"{script}: {exc}")
    if problems:
        raise InputError("\n".join(problems) + "\n  fix: correct the scenario; nothing ran")
