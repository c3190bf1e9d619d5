"""`--format json`: a command's answer as one versioned JSON document on stdout (docs/json.md).

Opt in with `@answers(NAME, EMPTY)` and `add(parser)`: in JSON mode stdout goes to stderr, the
answer comes from typed objects (`update`), never text, `say` sentences become `notes`, and an
error writes nothing to stdout. `harness report` keeps results.json's own document.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from harness.app.answer import Answer, collecting
from harness.app.answer import active as active  # re-exported for the commands
from harness.app.answer import cell_ref as cell_ref
from harness.app.answer import note as note
from harness.app.answer import say as say
from harness.app.answer import update as update
from harness.app.report import newest_run
from harness.cli import options
from harness.result.codec import encode

SCHEMA = "harness.answer/1"

Command = Callable[[argparse.Namespace], int]


def add(p: argparse.ArgumentParser) -> None:
    """The command's --format option (console or json): `options.add(p, "format")`."""
    options.add(p, "format")


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
