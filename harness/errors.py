"""The harness's own failures and their exit codes. A leak or a slowdown is a verdict, never
an exception; these are for what stops the harness itself::

    HarnessError                 exit 3 unless a subclass says otherwise
     +-- InputError              exit 2: the user's input is wrong (fix the file/flag)
     |    +-- SpecError          a matrix.yaml problem, with file, key path and line
     +-- EnvironmentUnavailable  exit 3: engine, GPU, image or interpreter missing
     |    +-- EngineUnavailable, ImageUnavailable, GpuUnavailable
     +-- StoreError              exit 3: results directory unusable (disk full, locked)
"""

from __future__ import annotations

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
