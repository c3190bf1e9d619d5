"""A command's answer in JSON (`--format json`, docs/json.md): a command hands over its
answer's keys (`update`) and sentences (`say`, `note`) without knowing whether JSON or
words will show them; `answers(NAME, EMPTY)` on its `run` prints, in JSON mode, one
versioned document on stdout built from those typed objects, never text (stdout goes to
stderr meanwhile, and an error writes nothing to stdout). Outside `collecting`, `say`
prints and the rest do nothing. `harness report` keeps results.json's own document.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.app.report import newest_run
from harness.result.codec import encode
from harness.result.model import cell_text

if TYPE_CHECKING:
    from harness.result.model import CellResult


@dataclass
class Answer:
    """What a command answers in JSON mode, gathered while it runs."""

    command: str
    answer: dict[str, object]
    notes: list[str] = field(default_factory=list)


_CURRENT: ContextVar[Answer | None] = ContextVar("harness_answer", default=None)


@contextlib.contextmanager
def collecting(sink: Answer) -> Iterator[Answer]:
    """While the block runs, `update`, `say` and `note` go to `sink`."""
    token = _CURRENT.set(sink)
    try:
        yield sink
    finally:
        _CURRENT.reset(token)


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
    in words (`result.model.cell_text`)."""
    if res is None:
        return None
    return {"id": res.id, "row": res.row, "image": res.image.label,
            "verdict": str(res.verdict), "reason": res.reason, "text": cell_text(res)}


SCHEMA = "harness.answer/1"

Command = Callable[[argparse.Namespace], int]


def answers(command: str, empty: Mapping[str, object]) -> Callable[[Command], Command]:
    """`run` of `command`, printing in JSON mode the envelope of `empty` (every answer
    key) updated with what the command hands over."""
    def wrap(run: Command) -> Command:
        @functools.wraps(run)
        def answering(args: argparse.Namespace) -> int:
            if getattr(args, "format", None) != "json":
                return run(args)
            sink = Answer(command, copy.deepcopy(dict(empty)))
            out = sys.stdout
            with collecting(sink), contextlib.redirect_stdout(sys.stderr):
                code = run(args)
            write(out, envelope(sink, code))
            return code
        return answering
    return wrap


def results_dir(path: Path, command: str) -> Path:
    """The newest run of results directory `path`, handed to the answer as its `dir`."""
    root = newest_run(path, f"harness {command}")
    update(dir=str(root))
    return root


def write(out: TextIO, document: Mapping[str, object]) -> None:
    """One JSON document and a newline on `out`, through `result.codec.encode`."""
    text = json.dumps(encode(document), indent=1, allow_nan=False)
    out.write(text + "\n")
    out.flush()


def envelope(sink: Answer, code: int) -> dict[str, object]:
    """The document `--format json` prints."""
    return {"schema": SCHEMA, "command": sink.command, "exit": code,
            "notes": list(sink.notes), "answer": sink.answer}
