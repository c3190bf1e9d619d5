"""The one module that spawns processes: agent subprocesses, venv builds, tools.

Children start in their own session so a deadline or Ctrl-C kills the whole group.
`run_warm` forks an agent from a warm interpreter (`ForkServer`), saving its start.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
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
    """A fork of this process that serves runs, used as a `subprocess.Popen` is."""

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
    """The fork server exited before it forked the run: run it in a fresh interpreter."""


class Refused(ServerGone):
    """The fork server's preload started a thread, which a forked run would not have."""


class ForkServer:
    """One warm interpreter running forkserver.py: JSON lines, one run at a time."""

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
        self.send({"argv": list(args), "env": env, "per_run": list(_PER_RUN_ENV),
                   "cwd": str(cwd or os.getcwd()),
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
        """Kill the run's group; its exit code, or None (the server is then closed)."""
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


# The tools a caller started through stream_lines and may have to stop (kill_all).
Running = set[subprocess.Popen[bytes]]


@dataclass(frozen=True)
class Warm:
    """An agent run to fork from a warm server (`run_warm`) where one can take it."""

    python: str
    server: Path                # harness/agent/forkserver.py
    args: Sequence[str]         # the agent's arguments
    preload: Path | None        # the scenario: its modules imported once, in the server
    cgroup_procs: Path | None   # the cgroup the run joins


def run_with_deadline(argv: Sequence[str], *, env: dict[str, str], log: Path,
                      deadline_s: float, cwd: Path | None = None,
                      on_start: Callable[[int], None] | None = None,
                      poll: Callable[[], None] | None = None,
                      warm: Warm | None = None) -> Finished:
    """Run argv (no shell), output to `log`, killing the group at the deadline or on
    KeyboardInterrupt; `warm`: fork it where a server takes it; `poll`: every ~0.2 s."""
    if warm is not None:
        done = run_warm(warm, env=env, log=log, deadline_s=deadline_s, cwd=cwd,
                        on_start=on_start, poll=poll)
        if done is not None:
            return done
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
                kill_group(proc)
                reap_group(proc.pid)
                return Finished(proc.returncode, True, time.monotonic() - start)
    except BaseException:
        kill_group(proc, grace=1.0)
        raise
    reap_group(proc.pid)
    return Finished(proc.returncode, False, time.monotonic() - start)


_SPAWN_AGAIN = (errno.EFAULT, errno.EAGAIN, errno.ENOMEM, errno.EINTR)


def check_output(argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
                 cwd: Path | None = None, stdin: str | None = None) -> tuple[int, str]:
    """Run a short tool; (returncode, output). Missing program: 127; a refused spawn:
    126 (tried twice), so the caller says it, not a traceback."""
    for attempt in (1, 2):
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
        except OSError as exc:
            if attempt == 2 or exc.errno not in _SPAWN_AGAIN:
                return 126, f"could not start {argv[0]}: {exc}"
            time.sleep(0.2)
        else:
            return done.returncode, done.stdout.decode("utf-8", "replace")
    raise AssertionError("unreachable")


# The probe prints sys.version, then a JSON line of executable, arguments, environment.
_SAID = "harness-probe: "
_PROBE = ("import json,os,sys\ntry:\n with open('/proc/self/cmdline','rb') as f: a=[x.decode("
          "'utf-8','replace') for x in f.read().split(b'\\0')[1:-1]]\nexcept (IOError,OSError)"
          ": a=None\nprint(sys.version)\nprint(" + repr(_SAID) + "+json.dumps({'executable':"
          "sys.executable,'args':a,'env':dict(os.environ)}))\n")
_OWN_VARS = {"PWD", "SHLVL", "_", "LC_CTYPE"}   # the shell's, and Python's C locale coerced


def python_probe(python: str) -> tuple[int, str, str, dict[str, str]]:
    """(returncode, the file to run, sys.version, the PYENV* variables): the file behind
    a slow-starting shim where `python` is one."""
    ours = dict(os.environ)     # passed as it is: a library's setenv() is not in it
    rc, out = check_output([python, "-c", _PROBE], timeout=60, env=ours)
    lines = out.strip().splitlines()
    said = next((t[len(_SAID):] for t in lines if t.startswith(_SAID)), "")
    version = "\n".join(t for t in lines if not t.startswith(_SAID)).strip()
    try:
        seen = json.loads(said) if rc == 0 else {}
    except ValueError:
        seen = {}
    runs, env = seen.get("executable"), seen.get("env") or {}
    changed = {k for k in set(env) | set(ours) if env.get(k) != ours.get(k)} - _OWN_VARS
    mine = {k for k in changed if k.startswith(("PYENV", "_PYENV")) and k in env}
    if (isinstance(runs, str) and os.path.isabs(runs) and os.access(runs, os.X_OK)
            and seen.get("args") == ["-c", _PROBE] and changed - mine <= {"PATH"}
            and str(env.get("PATH", "")).endswith(ours.get("PATH", ""))):
        return rc, runs, version, {k: env[k] for k in mine}
    return rc, python, version, {}


def stream_lines(argv: Sequence[str], *, on_line: Callable[[str], None],
                 env: dict[str, str] | None = None, cwd: Path | None = None,
                 running: set[subprocess.Popen[bytes]] | None = None) -> int:
    """Run a long tool, each output line to on_line; in `running` for Ctrl-C to kill."""
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
        kill_group(proc, grace=1.0)
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


# Variables that change between runs but not what a warm interpreter would be.
_PER_RUN_ENV = ("PYTEST_CURRENT_TEST",)
MAX_SERVERS = 4


_SERVERS: dict[tuple[str, ...], ForkServer] = {}
_NO_PRELOAD: set[tuple[str, ...]] = set()
_POOL = threading.Lock()


def _server(python: str, script: Path, env: dict[str, str]
            ) -> tuple[tuple[str, ...], ForkServer | None]:
    """The warm server of `python` and `env`, started where none is; None where
    MAX_SERVERS serve runs now (a sweep's lanes): the oldest idle one makes way."""
    key = (python, *sorted(f"{k}={v}" for k, v in env.items() if k not in _PER_RUN_ENV))
    with _POOL:
        server = _SERVERS.get(key)
        if server is None or not server.alive():
            if len(_SERVERS) >= MAX_SERVERS:
                idle = next((k for k, s in _SERVERS.items() if not s.lock.locked()), None)
                if idle is None:
                    return key, None
                _SERVERS.pop(idle).close()
            server = ForkServer(subprocess.Popen(
                [python, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=env, start_new_session=True),
                key not in _NO_PRELOAD)
            _SERVERS[key] = server
        return key, server


def run_warm(warm: Warm, *, env: dict[str, str], log: Path, deadline_s: float,
             cwd: Path | None = None, on_start: Callable[[int], None] | None = None,
             poll: Callable[[], None] | None = None) -> Finished | None:
    """The agent run as a fork of its warm server; None where the server is busy, gone
    or refusing (the caller runs it afresh)."""
    if _HERE:
        return _run_here(_HERE[-1], warm, env=env, log=log, deadline_s=deadline_s, cwd=cwd,
                         on_start=on_start, poll=poll)
    key, server = _server(warm.python, warm.server, env)
    if server is None or not server.lock.acquire(blocking=False):
        return None
    try:
        return server.run(warm.args, env=env, log=log, deadline_s=deadline_s, cwd=cwd,
                          cgroup_procs=warm.cgroup_procs, preload=warm.preload,
                          on_start=on_start, poll=poll)
    except ServerGone as exc:
        _drop(key, server, exc)
        return None
    finally:
        server.lock.release()


def _drop(key: tuple[str, ...], server: ForkServer, exc: ServerGone) -> None:
    """Close a server gone or refusing (a refused preload: none for its environment)."""
    if isinstance(exc, Refused):
        _NO_PRELOAD.add(key)
    with _POOL:
        if _SERVERS.get(key) is server:
            del _SERVERS[key]
    server.close()


def warm_ahead(warm: Warm, env: dict[str, str], preloads: Sequence[Path],
               timeout: float = 120.0) -> None:
    """Start `warm`'s server now, `preloads` imported, outside the first run's clock."""
    each: list[Path | None] = [*preloads] or [None]
    for preload in each:
        key, server = _server(warm.python, warm.server, env)
        if server is None:
            return
        with server.lock:
            try:
                server.ready(preload if server.preload else None, timeout)
            except ServerGone as exc:
                _drop(key, server, exc)


_HERE: list[ForkServer] = []     # the fork of this process that runs a block's runs


@contextlib.contextmanager
def runs_forked_here(script: Path) -> Iterator[None]:
    """Fork every warm run in the block from one fork of this process as it stands, so
    the runs have its objects live (`harness.check(here=True)`).

    Raises:
        OSError: this process cannot fork.
    """
    server = ForkServer(Forked(*forkserver(script).fork_here()), False)
    _HERE.append(server)
    try:
        yield
    finally:
        _HERE.remove(server)
        server.close()


def _run_here(server: ForkServer, warm: Warm, *, env: dict[str, str], log: Path,
              deadline_s: float, cwd: Path | None, on_start: Callable[[int], None] | None,
              poll: Callable[[], None] | None) -> Finished:
    """A run forked from the fork of this process; a server gone is said in its log."""
    with server.lock:
        try:
            return server.run(warm.args, env=env, log=log, deadline_s=deadline_s, cwd=cwd,
                              cgroup_procs=warm.cgroup_procs, preload=None,
                              on_start=on_start, poll=poll)
        except ServerGone as exc:
            with log.open("a", encoding="utf-8") as out:
                out.write(f"harness: the fork of the test's process that runs it is gone "
                          f"({exc})\n")
            return Finished(None, False, 0.0)


_LOADED: dict[Path, ModuleType] = {}
_AGENTS = ("agent",)     # what forkserver.py imports by name


def forkserver(script: Path) -> ModuleType:
    """harness/agent/forkserver.py loaded here once and warmed up, for `runs_forked_here`."""
    if script not in _LOADED:
        mine = {name: sys.modules.pop(name) for name in _AGENTS if name in sys.modules}
        sys.path.insert(0, str(script.parent))
        try:
            spec = importlib.util.spec_from_file_location("_harness_forkserver", script)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(script.parent))
            for name in _AGENTS:
                sys.modules.pop(name, None)
            sys.modules.update(mine)
        module.warm_up()
        _LOADED[script] = module
    return _LOADED[script]


@atexit.register
def close_servers() -> None:
    """Close every fork server at exit."""
    with _POOL:
        while _SERVERS:
            _SERVERS.popitem()[1].close()
