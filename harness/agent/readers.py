"""What the agent reads of this process: memory (statm, smaps_rollup, cgroup, glibc heap),
threads and open file descriptors; and the USS of the processes it started (a
multiprocessing pool's, a DataLoader's workers). Stdlib only, Python 3.6+."""
import ctypes
import errno
import os
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class ProcFile(object):
    """A /proc or /sys file kept open and re-read with pread: ~1 us instead of ~80 us
    for open+read+close, which matters at one sample every few milliseconds."""

    def __init__(self, path):
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY)
        except OSError:
            self.fd = None

    def read(self, size=8192):
        if self.fd is None:
            return None
        try:
            return os.pread(self.fd, size, 0).decode("ascii", "replace")
        except OSError:
            return None


def proc_kib(path, key):
    """Bytes of the "KEY: N kB" line of a /proc file (/proc/meminfo, /proc/PID/status),
    or None where the file or the line cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class Readers(object):
    """All per-sample readings of this process. USS walks every page table entry
    (smaps_rollup costs ~0.3-1 ms), so it is re-read only when the time since the last
    read is at least USS_BUDGET times its cost: its overhead stays under 0.1 %. `kids`,
    the USS of every process below this one but those of `exclude_pids` (the agent's own
    helpers) and theirs, is read on every sample (its cost counts in the sample's)."""

    USS_BUDGET = 1000.0

    def __init__(self):
        self.statm = ProcFile("/proc/self/statm")
        self.status = ProcFile("/proc/self/status")
        self.smaps = ProcFile("/proc/self/smaps_rollup")
        self.cg_version, path = cgroup_reader()
        self.cgroup = ProcFile(path) if path else ProcFile("/nonexistent")
        self.uss_cost = 0.0
        self.uss_at = None
        self.ppids = {}             # pid -> parent pid, each /proc/<pid>/stat read once
        self.exclude_pids = set()   # processes (and all below them) `kids` leaves out
        self.lock = threading.Lock()
        self.spawning = threading.Lock()    # held while a helper starts (start_excluded)

    def rss(self):
        return self.rss_and_anon()[0]

    def rss_and_anon(self):
        """(RSS, anonymous RSS) bytes from one statm read: resident - shared is RssAnon.

        A cgroup is charged a shared library's file pages only by the first container
        that read them, so the host compares the cgroup with the anonymous part."""
        text = self.statm.read(256)
        try:
            fields = text.split() if text else None
            if not fields:
                return None, None
            return int(fields[1]) * PAGE, (int(fields[1]) - int(fields[2])) * PAGE
        except (ValueError, IndexError):
            return None, None

    def peak_rss(self):
        """VmHWM bytes: the kernel's high-water mark of this process's RSS since it
        started (every page counted when it was touched, not when a sample fell), or
        None where /proc does not say."""
        return proc_kib("/proc/self/status", "VmHWM:")

    def uss(self, force=False):
        """Private_Clean + Private_Dirty (+ Hugetlb) bytes, or None when skipped."""
        now = time.monotonic()
        with self.lock:
            if not force and self.uss_at is not None and (
                    now - self.uss_at) < self.USS_BUDGET * self.uss_cost:
                return None
            self.uss_at = now
        total = private_bytes(self.smaps.read(8192))
        if total is None:
            return None
        self.uss_cost = time.monotonic() - now
        return total

    def kids(self):
        """The USS bytes summed over every process below this one (children,
        grandchildren) but `exclude_pids` and theirs; None when there is none or none
        could be read."""
        total = None
        with self.spawning:     # no helper between its fork and its exclusion
            pids = self.descendants()
        for pid in pids:
            text = None
            try:
                fd = os.open("/proc/%d/smaps_rollup" % pid, os.O_RDONLY)
                try:
                    text = os.read(fd, 8192).decode("ascii", "replace")
                finally:
                    os.close(fd)
            except OSError:     # gone, or not ours to read
                pass
            uss = private_bytes(text)
            if uss is not None:
                total = (total or 0) + uss
        return total

    def start_excluded(self, start):
        """Start one of the agent's own helpers (`start()` returns it, a Popen) and leave
        it, with all below it, out of `kids` from its first instant: a listing of this
        process's children waits while it starts. (A timer sample that listed them
        between the fork and the exclusion read the helper once as the scenario's
        workers: a cell read "the worker processes' memory read 1 times: too few to call
        them flat", undecided.)"""
        with self.spawning:
            proc = start()
            self.exclude_pids.add(proc.pid)
        return proc

    def descendants(self):
        """The pids below this process, from each process's parent pid in /proc: its
        stat is read once, when its pid first shows (a pid is reused only after the
        kernel has gone round every pid). Those of `exclude_pids`, and the processes
        below them, are left out.

        Where the kernel lists each thread's children (/proc/PID/task/TID/children), the
        tree is walked from this process down, whatever else runs on the host: a scan of
        every pid cost more the busier the host (a CI runner's thousands of processes),
        on every sample since the workers are read with each."""
        found = self.children_tree()
        if found is not None:
            return found
        try:
            pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        except OSError:
            return []
        known = self.ppids
        self.ppids = dict((pid, known[pid] if pid in known else parent_pid(pid))
                          for pid in pids)
        below = {}
        for pid, ppid in self.ppids.items():
            below.setdefault(ppid, []).append(pid)
        found, todo = [], [os.getpid()]
        while todo:
            for pid in below.get(todo.pop(), ()):
                if pid not in self.exclude_pids:
                    found.append(pid)
                    todo.append(pid)
        return found

    def children_tree(self):
        """The pids below this process from the kernel's children lists, or None where it
        keeps none (CONFIG_PROC_CHILDREN off)."""
        own = os.getpid()
        found, todo = [], [own]
        while todo:
            pid = todo.pop()
            try:
                tids = os.listdir("/proc/%d/task" % pid)
            except OSError:
                continue    # gone since its parent listed it
            for tid in tids:
                # os.open and os.read, not open(): its buffered text objects, made
                # on every sample, grew a quiet heap by ~100 B a reading.
                try:
                    fd = os.open("/proc/%d/task/%s/children" % (pid, tid), os.O_RDONLY)
                except OSError as exc:
                    missing = exc.errno == errno.ENOENT
                    if missing and pid == own and os.path.isdir(
                            "/proc/%d/task/%s" % (pid, tid)):
                        return None     # the thread is there, its list is not
                    continue
                try:
                    text = os.read(fd, 65536)
                except OSError:
                    continue
                finally:
                    os.close(fd)
                for kid in text.split():
                    kid = int(kid)
                    if kid not in self.exclude_pids:
                        found.append(kid)
                        todo.append(kid)
        return found

    def cgroup_bytes(self):
        text = self.cgroup.read(64)
        try:
            return int(text.strip()) if text else None
        except ValueError:
            return None

    def threads(self):
        n = status_int(self.status.read(4096), "Threads:")
        return threading.active_count() if n is None else n


def private_bytes(text):
    """Private_Clean + Private_Dirty + Private_Hugetlb bytes (the USS) of smaps_rollup
    text, or None without the text or with a line that does not parse."""
    if not text:
        return None
    total = 0
    for line in text.splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:", "Private_Hugetlb:")):
            try:
                total += int(line.split()[1]) * 1024
            except (ValueError, IndexError):
                return None
    return total


def parent_pid(pid):
    """The parent pid in /proc/<pid>/stat (after the command's closing parenthesis:
    a command may hold spaces and parentheses), or None when it cannot be read."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def status_int(text, label):
    """The number on the first line of /proc/<pid>/status text that starts with `label`
    (e.g. "Threads:"), or None when the text, the line or the number is missing."""
    for line in (text or "").splitlines():
        if line.startswith(label):
            try:
                return int(line.split()[1])
            except (ValueError, IndexError):
                return None
    return None


def cgroup_reader():
    """(version, path) of this process's cgroup memory usage file, or (None, None)."""
    for version, path in (("v2", "/sys/fs/cgroup/memory.current"),
                          ("v1", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        if os.path.exists(path):
            return version, path
    return None, None


def count_fds():
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


class Heap(object):
    """glibc heap in-use bytes (uordblks + hblkhd) read after malloc_trim(0).

    mallinfo2 (glibc >= 2.33) has size_t fields; older glibc has only mallinfo, whose
    int fields wrap past 2-4 GiB, so its readings are flagged in the header.
    """

    FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
              "uordblks", "fordblks", "keepcost")

    def __init__(self):
        self.func = None
        self.note = None
        try:
            libc = ctypes.CDLL(None)
        except OSError as exc:
            self.note = "cannot load libc: %s" % exc
            return
        kind = ctypes.c_size_t
        fn = getattr(libc, "mallinfo2", None)
        name = "mallinfo2"
        if fn is None:
            fn = getattr(libc, "mallinfo", None)
            kind = ctypes.c_int
            name = "mallinfo"
            self.note = "glibc < 2.33: mallinfo() int fields wrap past 2-4 GiB"
        if fn is None:
            self.note = "no mallinfo in libc (musl?): heap signal unavailable"
            return

        class Info(ctypes.Structure):
            _fields_ = [(n, kind) for n in Heap.FIELDS]

        fn.restype = Info
        fn.argtypes = []
        self._fn = fn
        self._trim = getattr(libc, "malloc_trim", None)
        if self._trim is not None:
            self._trim.argtypes = [ctypes.c_size_t]
            self._trim.restype = ctypes.c_int
        self.func = name

    TRIM_BUDGET = 1000.0
    _trim_at = None
    _trim_cost = 0.0

    def read(self):
        if self.func is None:
            return None
        if self._trim is not None:
            # malloc_trim walks the whole heap (~0.3 ms here); it moves nothing out of
            # the in-use count, so it runs only when it costs under 0.1 % of the time.
            now = time.monotonic()
            if self._trim_at is None or now - self._trim_at >= self.TRIM_BUDGET * self._trim_cost:
                self._trim(0)
                self._trim_at = now
                self._trim_cost = time.monotonic() - now
        info = self._fn()
        value = int(info.uordblks) + int(info.hblkhd)
        if self.func == "mallinfo":
            value &= 0xFFFFFFFF
        return value
