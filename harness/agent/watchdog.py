"""The safety stop: a process beside the agent (a hung step cannot stop itself) that ends
runaway memory before the OOM killer: past the limit the agent is asked to stop; past twice
it, or a grace time on, it is killed and its end record written for it. Growth counts from
the first call's end (CUDA context, compile); before it, growth past STOP_SHARE of the free
memory kills at once. Stdlib only, Python 3.6+."""
import json
import os
import select
import signal
import threading
import time

from readers import proc_kib

STOP_GROWTH = 384 * 2 ** 20     # growth after the first call that stops a run (--stop-growth)
STOP_SHARE = 0.5                # at most this share of the memory the cell could still use
KILL_SHARE = 0.75               # a call that does not return: killed by this share at most
CHECK_S = 0.01
GRACE_S = 2.0
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_of(pid):
    """Resident bytes of process `pid`, or None once it is gone."""
    try:
        with open("/proc/%d/statm" % pid, "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return None


class Statm(object):
    """Resident bytes of process `pid` from its statm kept open and re-read with pread
    (read 100 times a second); None once the process is gone."""

    def __init__(self, pid):
        try:
            self.fd = os.open("/proc/%d/statm" % pid, os.O_RDONLY)
        except OSError:
            self.fd = None

    def rss(self):
        if self.fd is None:
            return None
        try:
            return int(os.pread(self.fd, 256, 0).split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            return None


def _cgroup_dirs():
    """This process's memory cgroup directories, its own first, then its parents' up to
    the mount (v1 or v2); [] where none is read."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and ("memory" in parts[1].split(",") or parts[0] == "0"):
            mount = "/sys/fs/cgroup/memory" if parts[1] else "/sys/fs/cgroup"
            rel = parts[2].strip("/")
            out = []
            while True:
                path = os.path.join(mount, rel) if rel else mount
                if os.path.isdir(path):
                    out.append(path)
                if not rel:
                    return out
                rel = os.path.dirname(rel)
    return []


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def limited():
    """Whether a memory limit of this process's cgroup or one above holds it: then the
    kernel's OOM killer acts inside the cell (its ending reads `oom`) and the shares of
    the free memory do not apply."""
    for d in _cgroup_dirs():
        for name in ("memory.max", "memory.limit_in_bytes"):
            text = _read(os.path.join(d, name))
            if text is not None and text.isdigit() and int(text) < (1 << 60):
                return True
    return False


def free_memory():
    """Bytes this cell could still use: the lowest cgroup limit above it less its usage,
    else the host's MemAvailable; None where neither is read."""
    dirs = _cgroup_dirs()
    if dirs:
        limits = []
        for d in dirs:
            for name in ("memory.max", "memory.limit_in_bytes"):
                text = _read(os.path.join(d, name))
                if text is not None and text.isdigit() and int(text) < (1 << 60):
                    limits.append(int(text))
        stat = _read(os.path.join(dirs[0], "memory.stat")) or ""
        for line in stat.splitlines():
            key, _, value = line.partition(" ")
            if key == "hierarchical_memory_limit" and value.isdigit() \
                    and int(value) < (1 << 60):
                limits.append(int(value))
        used = _read(os.path.join(dirs[0], "memory.current")) or _read(
            os.path.join(dirs[0], "memory.usage_in_bytes"))
        if limits and used is not None and used.isdigit():
            return max(min(limits) - int(used), 0)
    return proc_kib("/proc/meminfo", "MemAvailable:")


def limit_for(stop_growth, free):
    """The growth that stops the run: --stop-growth, at most STOP_SHARE of `free` (None:
    not read, or a cgroup's limit holds the cell)."""
    if free is None:
        return stop_growth
    return min(stop_growth, int(STOP_SHARE * free))


class Watch(object):
    """The agent's side: the watchdog's pid, arming it, and whether it asked to stop
    (`tripped`: {"rss", "grew", "limit"}), read at every step."""

    def __init__(self, pid, to_dog, from_dog):
        self.pid = pid
        self.to_dog = to_dog
        self.tripped = None
        self.base = None
        self.limit = None
        reader = threading.Thread(target=self._listen, args=(from_dog,))
        reader.daemon = True
        reader.start()

    def arm(self, rss):
        """Measure growth from `rss` (the reading after the run's first call) on."""
        self.base = rss if rss is not None else 0
        if rss is None or self.to_dog is None:
            return
        try:
            os.write(self.to_dog, ("arm %d\n" % rss).encode())
        except OSError:
            pass

    def _listen(self, fd):
        buf = b""
        while True:
            try:
                chunk = os.read(fd, 512)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                parts = line.decode("ascii", "replace").split()
                if parts and parts[0] == "stop" and len(parts) == 4:
                    rss, grew, limit = (int(x) for x in parts[1:])
                    self.limit = limit
                    self.tripped = {"rss": rss, "grew": grew, "limit": limit}

    def close(self):
        """The run ended well: the watchdog leaves."""
        for fd in (self.to_dog,):
            try:
                os.close(fd)
            except (OSError, TypeError):
                pass
        self.to_dog = None


def start(stop_growth, out_path):
    """Fork the watchdog of this process; returns the agent's `Watch`, or None where it
    cannot run (no fork, no /proc, --stop-growth 0). `out_path`: where the watchdog
    writes the end record of an agent it killed."""
    if stop_growth <= 0 or not hasattr(os, "fork") or rss_of(os.getpid()) is None:
        return None
    agent = os.getpid()
    start_rss = rss_of(agent)
    # Where a memory limit holds the cell, the kernel stops it and says so (`oom`).
    free = None if limited() else free_memory()
    down_r, down_w = os.pipe()     # agent -> watchdog: "arm <rss>"
    up_r, up_w = os.pipe()         # watchdog -> agent: "stop <rss> <grew> <limit>"
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(down_w)
            os.close(up_r)
            _watch(agent, start_rss, free, stop_growth, down_r, up_w, out_path)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(down_r)
    os.close(up_w)
    return Watch(pid, down_w, up_r)


def _watch(agent, start_rss, free, stop_growth, down, up, out_path):
    """The watchdog's loop (in the forked child)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.set_blocking(down, False) if hasattr(os, "set_blocking") else None
    base = None
    # Before arming only the free-memory share counts, and there is no step to stop at.
    limit = int(STOP_SHARE * free) if free is not None else None
    kill_at = limit
    asked_at = None
    statm = Statm(agent)
    # Woken by the agent's message (or its end) or after CHECK_S.
    waiter = select.poll()
    waiter.register(down, select.POLLIN)
    while True:
        ready = waiter.poll(CHECK_S * 1000)
        if os.getppid() != agent:
            return
        if ready:
            try:
                got = os.read(down, 256)
            except (BlockingIOError, InterruptedError):
                got = None
            except OSError:
                return
            if got == b"":
                return                      # the agent closed its end: the run is over
            for line in (got or b"").decode("ascii", "replace").splitlines():
                parts = line.split()
                if parts and parts[0] == "arm" and len(parts) == 2:
                    base = int(parts[1])
                    now_free = None if free is None else free_memory()
                    limit = limit_for(stop_growth, now_free)
                    # Twice the limit, never past three quarters of what is free.
                    kill_at = 2 * limit if now_free is None else min(
                        2 * limit, int(KILL_SHARE * now_free))
        rss = statm.rss()
        if rss is None:
            return
        grew = rss - (base if base is not None else start_rss)
        if limit is None or grew < limit:
            continue
        if base is None and kill_at is not None and grew >= kill_at:
            _kill(agent, rss, grew, limit, True, out_path)
            return
        if asked_at is None:
            asked_at = time.monotonic()
            try:
                os.write(up, ("stop %d %d %d\n" % (rss, grew, limit)).encode())
            except OSError:
                return
        elif grew >= kill_at or time.monotonic() - asked_at >= GRACE_S:
            _kill(agent, rss, grew, limit, base is None, out_path)
            return


def _kill(agent, rss, grew, limit, in_setup, out_path):
    """Kill the agent, whose step did not return, and write its end record."""
    try:
        os.kill(agent, signal.SIGKILL)
    except OSError:
        return
    if not out_path:
        return
    end = {"type": "end", "status": "error",
           "memory_stop": {"rss": rss, "grew": grew, "limit": limit, "killed": True,
                           "phase": "setup" if in_setup else None},
           "error": {"type": "MemoryStop", "message": (
               "the watchdog killed the agent: its memory grew %d bytes, past the safety "
               "limit of %d, and the step did not return" % (grew, limit)),
               "traceback": ""}}
    time.sleep(0.05)   # the agent's last write lands first (it is dead: nothing follows)
    try:
        with open(out_path, "a") as f:
            f.write(json.dumps(end) + "\n")
    except OSError:
        pass
