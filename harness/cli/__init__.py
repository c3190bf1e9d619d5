"""`harness COMMAND`: thin commands over the pipeline. main(argv) -> exit code.

Exit codes: 0 clean, 1 regression or leak found, 2 bad input, 3 environment unavailable,
4 not a complete answer (cells undecided or missing), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import NoReturn, TextIO, cast

from harness.app.command import printer as printer  # re-exported for the commands
from harness.app.command import wait as wait_for_head_starts
from harness.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_INTERRUPTED,
    HarnessError,
    stream_closed,
)
from harness.errors import interruptible as interruptible  # re-exported for the commands
from harness.errors import without_out as without_out  # re-exported for the commands

HELP = """\
Find which container image, package version or GPU introduced a memory leak or a
slowdown, and show the numbers behind each verdict."""

EPILOG = """\
examples:
  harness sweep examples/multidict.yaml          run every cell of a matrix
  harness report reports/multidict-pop           re-render the newest run's reports
  harness history reports/multidict-pop          every run of a matrix, release by release
  harness compare DIR_A DIR_B                    where two hosts' (or runs') results differ
  harness compare DIR                            the hosts of one `hosts:` sweep compared
  harness bisect matrix.yaml --good A --bad B    first bad image of one row, ~log2(n) cells
  harness fit matrix.yaml --param batch=1..64    largest batch that runs, per row
  harness explain DIR                            where the first bad cell leaks or slows
  harness culprit DIR                            which package change did it, proved both ways
  harness day DIR                                the day a dated (as_of) row went bad
  harness doctor [matrix.yaml]                   what is missing on this machine

exit codes: 0 clean, 1 a leak/slowdown/regression/crash found, 2 bad input (matrix,
flag, scenario), 3 environment unavailable (engine, GPU, image), 4 no cell bad but not
a complete answer (cells undecided or missing), 130 interrupted.
`harness COMMAND --help` describes each command."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


# Each command's help as its module's parser gives it, so `harness --help` lists the
# commands without importing their modules (the CLI's one start-up boundary).
SUMMARIES = {
    "sweep": "run a matrix of images x GPUs x scenarios",
    "bisect": "find the first bad image of one row by bisection",
    "fit": "largest value of an integer param that runs, per row",
    "explain": "where the first bad cell leaks or slows, against the last good one",
    "culprit": "which package change made the first bad image bad, proved both ways",
    "day": "the day a dated (`as_of:`) row went bad, and what changed that day",
    "compare": "join two results directories and show differences",
    "report": "re-render reports from a results directory",
    "history": "every run of a matrix joined: each image's latest verdict per row and host, "
               "flaky images marked",
    "images": "build or list the offline test images",
    "doctor": "check engine, GPU runtime, driver, GPUs and images",
    "watch": "run a repository's new tags against a baseline tag",
}
COMMANDS = tuple(SUMMARIES)


def build_parser(command: str | None = None, *, listed: bool = False) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone (importing no other command's
    module); with `listed` and no command, the commands by their `SUMMARIES` alone."""
    # lazy: a circle: the package root names the API, which imports this module
    from harness import __version__

    parser = _Parser(prog="harness", description=HELP, epilog=EPILOG,
                     formatter_class=FittedHelpFormatter)
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser,
                                metavar="COMMAND")
    for name in (command,) if command in COMMANDS else COMMANDS:
        if listed and command not in COMMANDS:
            sub.add_parser(name, help=SUMMARIES[name])
        else:
            # lazy: the CLI's one start-up boundary: a command's module with its parser
            importlib.import_module(f"harness.cli.{name}").add_parser(sub)
    _own_parser(parser)
    return parser


def _own_parser(parser: argparse.ArgumentParser) -> None:
    """Each (sub)command's namespace carries its own parser, so an unknown flag is
    answered with that command's usage, not the top-level one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(_parser=child)
                _own_parser(child)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_cell"]:  # hidden: one cell inside a Slurm job (runtimes/slurm.py)
        # lazy: only the hidden `_cell` command (inside a Slurm job) needs it
        from harness.runtimes import job_cell

        return job_cell(argv[1:])
    # Before parsing, so help output goes through the wrappers too.
    closed = closed_to_null()
    out, err = sys.stdout, sys.stderr
    help_only = not argv or any(a in ("-h", "--help", "--version", "--list") for a in argv)
    if help_only and "stdout" in closed:
        # Help's answer is what it prints: to a closed stdout, exit 3 as to a full disk.
        with contextlib.suppress(OSError, ValueError):
            err.write(f"harness: stdout is closed; {_kept(argv, True)}\n")
            err.flush()
        return EXIT_ENVIRONMENT
    wrapped, wrapped_err = ReaderMayLeave(out, "stdout"), ReaderMayLeave(err, "stderr")
    sys.stdout, sys.stderr = cast(TextIO, wrapped), cast(TextIO, wrapped_err)
    try:
        code = _command(argv, wrapped, wrapped_err)
    finally:
        wrapped.flush()     # what is still buffered, while a closed pipe can be told
        wrapped_err.flush()
        sys.stdout, sys.stderr = out, err
    lost = wrapped.failed or wrapped_err.failed
    stopped = wrapped.closed_by or wrapped_err.closed_by     # said by the interruption
    if lost and not stopped:
        # Help and `sweep --list` answer with what they print: lost, it is exit 3
        with contextlib.suppress(OSError, ValueError):
            if not wrapped_err.left:
                err.write(f"harness: {lost}; {_kept(argv, help_only)}\n")
                err.flush()
        if help_only:    # what it was asked for is what could not be written
            return EXIT_ENVIRONMENT
    return code


def closed_to_null() -> list[str]:
    """Point a stdout or stderr closed before the start at /dev/null, so a print does
    not fail and no file opened later takes its descriptor; the names of those closed."""
    closed = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        closed.append(name)
        try:
            os.fstat(fd)            # taken since by a file of ours: leave it be
            stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (for the run)
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)     # the lowest free: `fd`, mostly
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            stream = open(fd, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        setattr(sys, name, stream)
    return closed


def _kept(argv: Sequence[str], help_only: bool) -> str:
    """Where the answer of a command whose output could not be written still is."""
    if help_only:
        return ("the list was not printed (exit 3)" if "--list" in argv
                else "the help was not printed (exit 3)")
    if argv[0] in ("compare", "doctor", "images") or "--format" in argv:
        return "the answer is in the exit code"
    return "the answer is in the exit code and in the results directory"


def _command(argv: list[str], out: ReaderMayLeave, err: ReaderMayLeave) -> int:
    parser = build_parser(argv[0] if argv else None, listed=True)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            owner = getattr(args, "_parser", parser)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        code: int = args.func(args)
        return code
    except HarnessError as exc:
        sys.stderr.write(f"harness: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        closed = out.closed_by or err.closed_by
        why = f"stopped: {closed}" if closed else "interrupted"
        sys.stderr.write(f"\nharness: {why}; {after_interrupt(args)}\n")
        return EXIT_INTERRUPTED


# What an interrupted command keeps, and the command that goes on from there.
AGAIN = "nothing was written; run the same command again"
AFTER_INTERRUPT = {
    "sweep": "finished cells are saved (run the same command with --resume to complete)",
    "watch": "finished cells are saved; `harness sweep DIR/matrix.yaml --resume DIR` "
             "completes the run, or run harness watch again",
    "bisect": "finished probes are saved (run the same command again: it reuses them)",
    "fit": "finished probes are saved (run the same command again: it reuses them)",
    "explain": "explained cells are saved (run the same command again for the rest)",
    "culprit": "finished probes are saved (run the same command again: it reuses them)",
}


NOTHING_TO_RESUME = "no cell had finished, so nothing was saved; run the same command again"


def after_interrupt(args: argparse.Namespace) -> str:
    """What an interrupted command kept (a sweep before its first cell: nothing)."""
    resumes = getattr(args, "resumes", None)
    if args.command == "sweep" and resumes is not None:
        # lazy: only on an interrupted sweep
        from harness.store.runs import resumable

        out, name, matrix = resumes
        if resumable(out / name, name, matrix) is None:
            return NOTHING_TO_RESUME
    return AFTER_INTERRUPT.get(args.command, AGAIN)


class ReaderMayLeave:
    """sys.stdout/stderr while a command runs: when the reader leaves (`| head -1`) or a
    write fails, later output goes to /dev/null and the command keeps its own exit code;
    while cells run, it stops as an interruption instead (exit 130)."""

    def __init__(self, out: TextIO, name: str = "stdout"):
        self._out = out
        self.name = name
        self.left = False
        self.failed = ""        # why a write failed, other than a reader that left
        self.closed_by = ""     # set when the failure stopped a running command

    def write(self, text: str) -> int:
        if not self.left:
            try:
                return self._out.write(text)
            except OSError as exc:
                self._leave(exc)
        return len(text)

    def writelines(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.left:
            try:
                self._out.flush()
            except OSError as exc:
                self._leave(exc)

    def _leave(self, exc: OSError | None = None) -> None:
        """Point the descriptor at /dev/null, so the interpreter's last flush won't fail."""
        self.left = True
        if exc is not None and not isinstance(exc, BrokenPipeError):
            self.failed = f"{self.name} could not be written ({exc.strerror or exc})"

        # Set first: on the main thread, stream_closed() raises the interruption at once.
        self.closed_by = self.failed or f"{self.name} was closed (its reader left)"
        if not stream_closed():
            self.closed_by = ""
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._out.fileno())
            finally:
                os.close(null)

    def __getattr__(self, name: str) -> object:
        return getattr(self._out, name)


def entry() -> None:
    finish(main())


def finish(code: int) -> NoReturn:
    """Exit with `code`, skipping the interpreter's last garbage collection (nothing
    needs it). Head-start imports are waited for first: exiting under a thread inside a
    C extension's import can crash."""
    wait_for_head_starts()
    gc.freeze()
    sys.exit(code)


# `--help` text that keeps its layout (examples in two columns) and fits the terminal,
# where raw text would break mid-word. An example: command, 2+ spaces, what it does.
EXAMPLE = re.compile(r"^(?P<lead>\s+)(?P<cmd>\S(?:.*?\S)?)(?P<gap>\s{2,})(?P<said>\S.*)$")
NARROWEST = 20      # a description column narrower than this goes under its command


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False)


def _row(lines: list[str], width: int) -> list[str]:
    """An indented row (an example, an exit code) and its continuation lines, fitted."""
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
    """`text` as written where it fits `width`; else rows keep their columns (or go
    under them below `NARROWEST`) and long paragraphs are refilled."""
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
