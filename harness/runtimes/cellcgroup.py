"""A memory cgroup of the cell's own on the local runtime, where the host allows one.

A local cell otherwise shares the harness's cgroup: its `cgroup` readings are the whole
session's, a `mem_limit:` cannot hold it, and a kernel OOM kill reads as a plain
SIGKILL. In a cgroup of its own (a child of the harness's memory cgroup: cgroup v1's
memory controller, or v2 where the parent delegates it), the cell's memory is its own,
`mem_limit:` is applied, and the kernel's count of OOM kills in it (`oom_kill` in
memory.oom_control, or memory.events) and its peak say how the run ended. The agent
joins it before it starts (`wrap`: a shell writes its pid to cgroup.procs, then execs
the agent). Where none can be made, the host-wide count in /proc/vmstat is read
instead (`vmstat_oom_kills`), which another process's OOM kill can also move.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
_NAMES = itertools.count()


# A memory cgroup's files by version: what an engine's stats report as usage, its peak,
# the limit and the anonymous memory (its `rss`, a key of memory.stat), and the file
# that counts OOM kills (`oom_kill`).
FILES = {1: {"usage": "memory.usage_in_bytes", "max_usage": "memory.max_usage_in_bytes",
             "limit": "memory.limit_in_bytes", "rss": "rss", "events": "memory.oom_control"},
         2: {"usage": "memory.current", "max_usage": "memory.peak", "limit": "memory.max",
             "rss": "anon", "events": "memory.events"}}


@dataclass(frozen=True)
class Ending:
    """What the cell's cgroup saw: OOM kills in it, its peak and its limit (bytes)."""

    oom_kills: int
    peak: int | None
    limit: int | None


def memory_cgroups(lines: list[str], root: Path = ROOT) -> Iterator[tuple[Path, int]]:
    """The memory cgroup directories, with their version, that a /proc/<pid>/cgroup's
    `lines` name: cgroup v1's memory controller's first, then v2's unified one."""
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            yield root / "memory" / path.lstrip("/"), 1
    for line in lines:
        if line.startswith("0::"):
            yield root / line[3:].lstrip("/"), 2


def _own_memory_cgroup() -> tuple[Path, int] | None:
    """The harness's own memory cgroup directory and its version, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for here, version in memory_cgroups(lines):
        if version == 1:
            return here, 1
        try:
            if "memory" in (here / "cgroup.subtree_control").read_text().split():
                return here, 2
        except OSError:
            return None
    return None


def read_int(path: Path) -> int | None:
    """A one-number file's value (None: unreadable, or not a number: "max")."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _limit(path: Path) -> int | None:
    """A memory limit file's bytes; None for none ("max", or v1's near-2**63 default)."""
    limit = read_int(path)
    return limit if limit is not None and limit < 1 << 60 else None


def counter(path: Path, key: str) -> int:
    """A "key value" line's value in a flat keyed file (0 where absent)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _limited(path: Path, version: int) -> bool:
    """Whether a memory limit holds the cgroup at `path` or one above it."""
    name = FILES[version]["limit"]
    for d in (path, *path.parents):
        if d == ROOT or ROOT not in d.parents:
            break
        if _limit(d / name) is not None:
            return True
    return False


def memory_now(path: Path, version: int) -> dict[str, int | None] | None:
    """The cgroup at `path`'s memory as an engine's stats stream gives it, in bytes:
    `usage`, `max_usage` (None without the file: v2's memory.peak came in Linux 5.19),
    `limit` (None: none) and `rss` (anonymous memory); None where the cgroup is gone."""
    files = FILES[version]
    usage = read_int(path / files["usage"])
    if usage is None:
        return None
    return {"usage": usage, "max_usage": read_int(path / files["max_usage"]),
            "limit": _limit(path / files["limit"]),
            "rss": counter(path / "memory.stat", files["rss"])}


def vmstat_oom_kills() -> int | None:
    """The kernel's count of OOM kills since boot, host-wide (None: not read)."""
    path = Path("/proc/vmstat")
    return counter(path, "oom_kill") if path.exists() else None


@dataclass
class CellCgroup:
    """One cell's memory cgroup: made by `make`, joined through `wrap`, read once the
    run ended (`ending`) and removed (`remove`)."""

    path: Path
    version: int

    @classmethod
    def make(cls, cell_id: str, limit: int | None, inside_limits: bool = False
             ) -> CellCgroup | None:
        """A new cgroup for the cell below the harness's own, with `limit` bytes as its
        memory limit where given; None where the host does not allow one, or (unless
        `inside_limits`) where a memory limit already holds the harness (a Slurm job's,
        a container's): that cgroup's own accounting of an OOM kill (Slurm's
        OUT_OF_MEMORY) must see it, and it holds the cell already."""
        own = _own_memory_cgroup()
        if own is None:
            return None
        parent, version = own
        if not inside_limits and _limited(parent, version):
            return None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cell_id)[:80]
        path = parent / f"harness-{os.getpid()}-{next(_NAMES)}-{safe}"
        try:
            path.mkdir()
        except OSError:
            return None
        made = cls(path, version)
        if limit is not None:
            name = "memory.limit_in_bytes" if version == 1 else "memory.max"
            try:
                (path / name).write_text(str(limit))
            except OSError:
                made.remove()
                return None
        return made

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the cgroup: a shell joins it, then execs the command (the
        pid stays the command's)."""
        return ["/bin/sh", "-c", 'echo $$ > "$1" 2>/dev/null; shift; exec "$@"', "sh",
                str(self.path / "cgroup.procs"), *argv]

    def ending(self) -> Ending:
        """OOM kills in the cgroup, its peak and its limit."""
        files = FILES[self.version]
        return Ending(counter(self.path / files["events"], "oom_kill"),
                      read_int(self.path / files["max_usage"]), _limit(self.path / files["limit"]))

    def remove(self) -> None:
        """Remove the cgroup: what is left in it (the agent's watchdog, a scenario's
        worker outliving its cell) is killed first, and it is tried for at most 0.2 s,
        so that a lane ending on Ctrl-C or a reader that left is not held up. The waits
        between tries start at 1 ms and double: a process just killed leaves within a
        millisecond or two, and each check of a test suite pays them."""
        wait, end = 0.001, time.monotonic() + 0.2
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                self._kill_left()
                left = end - time.monotonic()
                if left <= 0:
                    return
                time.sleep(min(wait, left))
                wait *= 2

    def _kill_left(self) -> None:
        try:
            pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
