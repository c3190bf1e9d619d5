"""The harness's own failures and their exit codes. A leak or a slowdown is a verdict, never
an exception; these are for what stops the harness itself::

    HarnessError                 exit 3 unless a subclass says otherwise
     +-- InputError              exit 2: the user's input is wrong (fix the file/flag)
     |    +-- SpecError          a matrix.yaml problem, with file, key path and line
     +-- EnvironmentUnavailable  exit 3: engine, GPU, image or interpreter missing
     |    +-- EngineUnavailable, ImageUnavailable, GpuUnavailable
     +-- StoreError              exit 3: results directory unusable (disk full, locked)

And how a long command is interrupted (exit 130): SIGTERM and SIGINT both end it through
KeyboardInterrupt (`interruptible`), as does a closed stdout or stderr while cells run
(`stream_closed`). Stdlib only, so the CLI and code inside a Slurm job
(`harness.runtimes.slurm`) share it without the runtime layer importing the CLI.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_UNDECIDED = 4       # no cell bad, but the answer is not whole: cells undecided or missing
EXIT_INTERRUPTED = 130


class HarnessError(Exception):
    """Base class; `exit_code` is what `harness` exits with."""

    exit_code = EXIT_ENVIRONMENT


class InputError(HarnessError):
    exit_code = EXIT_BAD_INPUT


class SpecError(InputError):
    """A problem in a matrix file, located by file, key path and line."""

    def __init__(self, file: str, path: str, line: int | None, problem: str, fix: str = ""):
        self.file = file
        self.path = path
        self.line = line
        self.problem = problem
        self.fix = fix
        where = f"{file}:{line}" if line is not None else file
        key = f" {path}:" if path else ""
        text = f"{where}:{key} {problem}"
        if fix:
            text += f"\n  fix: {fix}"
        super().__init__(text)


class EnvironmentUnavailable(HarnessError):
    exit_code = EXIT_ENVIRONMENT


class EngineUnavailable(EnvironmentUnavailable):
    pass


class ImageUnavailable(EnvironmentUnavailable):
    pass


class GpuUnavailable(EnvironmentUnavailable):
    pass


class StoreError(HarnessError):
    exit_code = EXIT_ENVIRONMENT


def without_out(exc: StoreError, fix: str) -> StoreError:
    """`exc` with `fix` for a command that has no --out (report, history): the store's
    own fix ("use --out DIR") is for the commands that do."""
    head = str(exc).split("\n  fix:", 1)[0]
    if "--out" not in str(exc):
        return exc
    return StoreError(f"{head}\n  fix: {fix}")


# Set while a long command runs cells: a closed stdout/stderr then ends it (`stream_closed`).
_RUNNING = threading.Event()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGINT both end a long command through KeyboardInterrupt, so running
    cells are killed and finished ones kept. SIGINT is set too because a shell starts
    background jobs with it ignored."""
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, on_term)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    _RUNNING.set()
    try:
        yield
    finally:
        _RUNNING.clear()
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def stream_closed() -> bool:
    """The reader of stdout or stderr left, or the stream cannot be written: while cells
    run, the command ends as an interruption (KeyboardInterrupt in the main thread), so
    finished cells are kept for `--resume`. True when it did; outside a run, False."""
    if not _RUNNING.is_set():
        return False
    _RUNNING.clear()        # once: the message of the interruption may fail to print too
    main = threading.main_thread().ident
    if main is None or not hasattr(signal, "pthread_kill"):
        _thread.interrupt_main()
        return True
    # A real SIGINT, as Ctrl-C: it wakes a main thread blocked in a wait, which
    # interrupt_main's flag alone would not.
    signal.pthread_kill(main, signal.SIGINT)
    return True
