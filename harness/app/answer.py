"""A command's answer as it runs, for `--format json` (`cli.answer` writes the envelope):
a command hands over its answer's keys (`update`) and sentences (`say`, `note`) without
knowing whether JSON or words will show them. Outside `collecting`, `say` prints and the
rest do nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
