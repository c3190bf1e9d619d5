"""A started agent process's end: its group killed and reaped (`kill_group`,
`reap_group`), and a fork server spoken to (`ForkServer`: its requests, its replies, a
run it forked, that run killed at its deadline). `process`, the one module that starts
processes, starts them: a warm interpreter, or a fork of this process (`Forked`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

GRACE_S = 3.0


@dataclass
class Finished:
    returncode: int | None
    timed_out: bool
    duration_s: float


def kill_group(proc: subprocess.Popen[bytes] | Forked, grace: float = GRACE_S) -> None:
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


def reap_group(pgid: int) -> None:
    """SIGKILL what is left of a finished leader's process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class Forked:
    """A fork of this process that serves runs (forkserver's `fork_here`), read as a
    `subprocess.Popen` is: its pid (and process group), its requests and replies."""

    def __init__(self, pid: int, requests: int, replies: int) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = os.fdopen(requests, "wb")
        self.stdout: IO[bytes] | None = os.fdopen(replies, "rb")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:   # reaped already
                done, status = self.pid, 0
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = time.monotonic() + (timeout if timeout is not None else 3600.0)
        while (code := self.poll()) is None:
            if time.monotonic() > end:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.01)
        return code


class ServerGone(Exception):
    """The fork server exited before it forked the run: the run goes to a fresh
    interpreter."""


class Refused(ServerGone):
    """The fork server's preload started a thread, which a forked run would not have."""


class ForkServer:
    """One warm interpreter running harness/agent/forkserver.py: a request a line on its
    stdin, its replies a line each on its stdout; one run at a time (`lock`)."""

    def __init__(self, proc: subprocess.Popen[bytes] | Forked, preload: bool):
        self.preload = preload
        self.lock = threading.Lock()
        self._buffer = b""
        self.proc = proc


    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """Its stdin closed (it exits after the run it waits on), then killed."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        kill_group(self.proc, grace=0.5)
        with contextlib.suppress(OSError):
            assert self.proc.stdout is not None
            self.proc.stdout.close()

    def send(self, request: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise ServerGone(f"cannot write to the fork server: {exc}") from None

    def reply(self, timeout: float) -> dict[str, object] | None:
        """The next reply, or None when none came within `timeout` s.

        Raises:
            ServerGone: it exited (its stdout closed) or refused the run.
        """
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ServerGone("the fork server exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        got: dict[str, object] = json.loads(line)
        if "refused" in got:
            raise ServerGone(str(got["refused"])) if got.get("stale") else Refused(
                str(got["refused"]))
        return got

    def ready(self, preload: Path | None, timeout: float) -> None:
        """The server started and `preload` imported in it, forking nothing.

        Raises:
            ServerGone: it exited, refused the preload, or did not answer in time.
        """
        self.send({"argv": None, "preload": str(preload) if preload else None})
        if self.reply(timeout) is None:
            raise ServerGone("the fork server did not answer in time")

    def run(self, args: Sequence[str], *, env: dict[str, str], log: Path,
            deadline_s: float, cwd: Path | None, cgroup_procs: Path | None,
            preload: Path | None, on_start: Callable[[int], None] | None,
            poll: Callable[[], None] | None) -> Finished:
        """One agent run forked by the server, as `run_with_deadline` runs one.

        Raises:
            ServerGone: before the run was forked (nothing ran: run it afresh).
        """
        start = time.monotonic()
        self.send({"argv": list(args), "env": env, "cwd": str(cwd or os.getcwd()),
                   "log": str(log.absolute()),
                   "cgroup": str(cgroup_procs) if cgroup_procs else None,
                   "preload": str(preload) if preload and self.preload else None})
        got = None
        while got is None:
            got = self.reply(0.2)
            if got is None and time.monotonic() - start > deadline_s:
                raise ServerGone("the fork server did not fork the run in time")
        pid = int(str(got["pid"]))
        try:
            if on_start is not None:
                on_start(pid)
            while (got := self.reply(0.2)) is None:
                if poll is not None:
                    poll()
                if time.monotonic() - start > deadline_s:
                    code = self._kill_run(pid, GRACE_S)
                    return Finished(code, True, time.monotonic() - start)
        except ServerGone:      # killed under the run: the run's group goes with it
            reap_group(pid)
            self.close()
            return Finished(None, False, time.monotonic() - start)
        except BaseException:
            self._kill_run(pid, 1.0)
            raise
        reap_group(pid)
        return Finished(int(str(got["exit"])), False, time.monotonic() - start)

    def _kill_run(self, pid: int, grace: float) -> int | None:
        """The run's group killed (SIGTERM, then SIGKILL), its exit code as the server
        saw it; a server that does not say it is closed."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
            with contextlib.suppress(ServerGone):
                got = self.reply(wait)
                if got is not None:
                    reap_group(pid)
                    return int(str(got["exit"]))
        self.close()
        return None
