"""The one module that spawns processes: agent subprocesses, venv builds, tools.

Children start in their own session so a deadline or Ctrl-C kills the whole group,
escalating SIGTERM -> SIGKILL. When the leader exits by itself, whatever it forked and
left behind in its group (a scenario's worker holding memory) is killed too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

GRACE_S = 3.0
# The tools a caller started through stream_lines and may have to stop (kill_all).
Running = set[subprocess.Popen[bytes]]


@dataclass
class Finished:
    returncode: int | None
    timed_out: bool
    duration_s: float


def _kill_group(proc: subprocess.Popen[bytes], grace: float = GRACE_S) -> None:
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _reap_group(pgid: int) -> None:
    """SIGKILL what is left of a finished leader's process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_with_deadline(argv: Sequence[str], *, env: dict[str, str], log: Path,
                      deadline_s: float, cwd: Path | None = None,
                      on_start: Callable[[int], None] | None = None,
                      poll: Callable[[], None] | None = None) -> Finished:
    """Run argv (no shell), stdout+stderr to `log`, killing the group at the deadline.

    `poll` is called about every 0.2 s while the child runs (host-side sampling).
    KeyboardInterrupt kills the group before propagating.
    """
    start = time.monotonic()
    with log.open("ab") as out:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                start_new_session=True)
    try:
        if on_start is not None:
            on_start(proc.pid)
        while True:
            try:
                proc.wait(0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if poll is not None:
                poll()
            if time.monotonic() - start > deadline_s:
                _kill_group(proc)
                _reap_group(proc.pid)
                return Finished(proc.returncode, True, time.monotonic() - start)
    except BaseException:
        _kill_group(proc, grace=1.0)
        raise
    _reap_group(proc.pid)
    return Finished(proc.returncode, False, time.monotonic() - start)


def check_output(argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
                 cwd: Path | None = None, stdin: str | None = None) -> tuple[int, str]:
    """Run a short tool; (returncode, combined output). Missing program -> (127, message).
    `stdin`: text handed to the tool's standard input (else it reads nothing)."""
    try:
        done = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=None if stdin is not None else subprocess.DEVNULL,
                              input=stdin.encode() if stdin is not None else None,
                              timeout=timeout, env=env, cwd=cwd, check=False)
    except FileNotFoundError as exc:
        return 127, str(exc)
    except subprocess.TimeoutExpired as exc:
        out = exc.output.decode("utf-8", "replace") if isinstance(exc.output, bytes) else ""
        return 124, out + f"\n(timed out after {timeout:.0f}s)"
    return done.returncode, done.stdout.decode("utf-8", "replace")


def stream_lines(argv: Sequence[str], *, on_line: Callable[[str], None],
                 env: dict[str, str] | None = None, cwd: Path | None = None,
                 running: set[subprocess.Popen[bytes]] | None = None) -> int:
    """Run a long tool (pip, debootstrap), passing each output line to on_line. While it
    runs, the process is in `running` (so a Ctrl-C elsewhere can kill it)."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True)
    assert proc.stdout is not None
    if running is not None:
        running.add(proc)
    try:
        with proc.stdout:  # closed here, or the pipe leaks (a ResourceWarning per build)
            for raw in proc.stdout:
                on_line(raw.decode("utf-8", "replace").rstrip())
        return proc.wait()
    except BaseException:
        _kill_group(proc, grace=1.0)
        raise
    finally:
        proc.stdout.close()
        if running is not None:
            running.discard(proc)


def kill_all(running: set[subprocess.Popen[bytes]]) -> None:
    """Kill every process (group) in `running` now (Ctrl-C during a venv build)."""
    for proc in list(running):
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
