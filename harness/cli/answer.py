"""`--format json`: a command's answer as one versioned JSON document on stdout, the
same envelope for every command that answers (docs/json.md):

    {"schema": "harness.answer/1", "command": "explain", "exit": 0, "notes": [...],
     "answer": {...}}

A command opts in with `@answers(NAME, EMPTY)` on its `run` and `add(parser)`; in JSON
mode its `run` goes as in text mode, with three differences: what it would print on
stdout goes to stderr (progress, the lines a search prints as it goes), it hands its
answer here (`update`, built from the typed objects its text renderer reads, never
from the text) instead of rendering it, and its short sentences (`say`) become the
envelope's `notes`. A command that stops on an error (bad input, an environment it
cannot use, an interruption) writes nothing on stdout, in JSON mode too: its message
is on stderr and its exit code says which. `harness report --format json` is the one
exception: results.json's own document (`"schema": 2`), as it always was.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from harness.cli import options
from harness.result.codec import encode
from harness.result.words import cell_text

if TYPE_CHECKING:
    from harness.result.model import CellResult

SCHEMA = "harness.answer/1"

Command = Callable[[argparse.Namespace], int]


@dataclass
class Answer:
    """What a command answers in JSON mode, gathered while it runs."""

    command: str
    answer: dict[str, object]
    notes: list[str] = field(default_factory=list)

    def envelope(self, code: int) -> dict[str, object]:
        return {"schema": SCHEMA, "command": self.command, "exit": code,
                "notes": list(self.notes), "answer": self.answer}


_CURRENT: ContextVar[Answer | None] = ContextVar("harness_answer", default=None)


def add(p: argparse.ArgumentParser) -> None:
    """The command's --format option (console or json): `options.add(p, "format")`."""
    options.add(p, "format")


def answers(command: str, empty: Mapping[str, object]) -> Callable[[Command], Command]:
    """`run` of `command`, which in JSON mode prints the envelope of its answer: `empty`
    (every key of the command's answer, empty or null) updated with what it hands over
    (`update`) before it returns."""
    def wrap(run: Command) -> Command:
        @functools.wraps(run)
        def answering(args: argparse.Namespace) -> int:
            if getattr(args, "format", None) != "json":
                return run(args)
            sink = Answer(command, copy.deepcopy(dict(empty)))
            out = sys.stdout
            token = _CURRENT.set(sink)
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    code = run(args)
            finally:
                _CURRENT.reset(token)
            write(out, sink.envelope(code))
            return code
        return answering
    return wrap


def write(out: TextIO, document: Mapping[str, object]) -> None:
    """One JSON document and a newline on `out` (NaN and infinities as null, tuples
    as lists, dataclasses by their fields: `result.codec.encode`)."""
    text = json.dumps(encode(document), indent=1, allow_nan=False)
    out.write(text + "\n")
    out.flush()


def active() -> bool:
    """Whether the command runs in JSON mode (its answer goes to `update`)."""
    return _CURRENT.get() is not None


def update(**keys: object) -> None:
    """Keys of the answer, in JSON mode; nothing in text mode."""
    sink = _CURRENT.get()
    if sink is not None:
        sink.answer.update(keys)


def say(text: str) -> None:
    """A sentence of the answer: printed in text mode, one of the notes in JSON mode."""
    sink = _CURRENT.get()
    if sink is None:
        print(text)
    else:
        sink.notes.append(text.strip())


def note(text: str) -> None:
    """A note of the JSON answer, which text mode says in its own way (or not at all)."""
    sink = _CURRENT.get()
    if sink is not None and text.strip():
        sink.notes.append(text.strip())


def cell_ref(res: CellResult | None) -> dict[str, object] | None:
    """A cell as an answer names it: id, row, image label, verdict, reason, and the cell
    in words (`result.words.cell_text`, as the tables say it)."""
    if res is None:
        return None
    return {"id": res.id, "row": res.row, "image": res.image.label,
            "verdict": str(res.verdict), "reason": res.reason, "text": cell_text(res)}
