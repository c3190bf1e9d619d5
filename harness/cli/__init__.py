"""`python -m harness COMMAND`: thin commands over the pipeline. main(argv) -> exit code.

Exit codes: 0 clean, 1 regression or leak found, 2 bad input, 3 environment
unavailable (no engine, no GPU, image missing), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

from harness.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, HarnessError

COMMANDS = ("sweep", "bisect", "compare", "report", "images", "doctor", "watch")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"harness: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    from harness.cli import bisect, compare, doctor, images, report, sweep, watch

    parser = _Parser(prog="harness", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in (sweep, bisect, compare, report, images, doctor, watch):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_cell"]:  # hidden: one cell inside a Slurm job (runtimes/slurmjob.py)
        from harness.runtimes.slurmjob import main as cell_main

        return cell_main(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        code: int = args.func(args)
        return code
    except HarnessError as exc:
        sys.stderr.write(f"harness: {exc}\n")
        return exc.exit_code
    except BrokenPipeError:
        # `harness ... | head`: the reader left; not an error of ours.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stdout must stay open
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("\nharness: interrupted; finished cells are saved "
                         "(re-run with --resume to complete)\n")
        return EXIT_INTERRUPTED


def printer(quiet: bool) -> Callable[[str], None]:
    """Progress lines on stderr (`harness: ...`), or nothing with -q."""
    def progress(text: str) -> None:
        if not quiet:
            print(f"harness: {text}", file=sys.stderr, flush=True)

    return progress


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGINT both end a long command through KeyboardInterrupt, so running
    cells are killed and finished ones kept. SIGINT is set too because a shell starts
    background jobs with it ignored, and Python then keeps it ignored."""
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, on_term)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def entry() -> None:
    sys.exit(main())
