"""What the agent reads: this process's memory (statm, smaps_rollup, cgroup, glibc heap),
threads, fds and its children's USS; contention (Contention, AllThreads, a CPU-speed
canary); the GPU through NVML by ctypes (Nvml). Stdlib only, Python 3.6+.
`python readers.py [LIB]` prints NVML's summary as JSON (a probe for `harness doctor`).
"""
import ctypes
import errno
import json
import os
import sys
import threading
import time

import fields

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class ProcFile(object):
    """A /proc or /sys file kept open and re-read with pread: far cheaper than
    open+read+close at one sample every few milliseconds."""

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
    """Bytes of the "KEY: N kB" line of a /proc file, or None where it cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class Readers(object):
    """All per-sample readings of this process. USS is re-read only once USS_BUDGET times
    its cost has passed; `kids` (children's USS, but `exclude_pids`) on every sample."""

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
        """(RSS, anonymous RSS) bytes from one statm read; the host compares the cgroup
        with the anonymous part (shared pages are charged to their first reader)."""
        text = self.statm.read(256)
        try:
            fields = text.split() if text else None
            if not fields:
                return None, None
            return int(fields[1]) * PAGE, (int(fields[1]) - int(fields[2])) * PAGE
        except (ValueError, IndexError):
            return None, None

    def peak_rss(self):
        """VmHWM bytes: the kernel's RSS high-water mark since start (every page, not
        only at samples), or None."""
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
        """USS bytes summed over every process below this one but `exclude_pids` and
        theirs; None when there is none or none could be read."""
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
        """Start one of the agent's helpers (`start()` returns a Popen), excluded from
        `kids` from its first instant (no listing while it starts)."""
        with self.spawning:
            proc = start()
            self.exclude_pids.add(proc.pid)
        return proc

    def descendants(self):
        """The pids below this process, but `exclude_pids` and their trees: from the
        kernel's children lists where kept, else each pid's parent, read once."""
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
                # os.open/os.read, not open(): text objects made every sample grow the heap.
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
    """The USS bytes of smaps_rollup text, or None without text or with a bad line."""
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
    """The parent pid in /proc/<pid>/stat (after the last ')': a command may hold
    parentheses), or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def status_int(text, label):
    """The number on the first line of /proc status text starting with `label`, or None."""
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
    """glibc heap in-use bytes (uordblks + hblkhd) read after malloc_trim(0); mallinfo2
    where glibc >= 2.33, else mallinfo, whose int fields wrap (flagged in the header)."""

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
            # malloc_trim walks the whole heap and moves nothing out of the in-use
            # count: run only while it costs under 0.1 % of the time.
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


# ---------------------------------------------------------------- contention
# Contention members by name: True for a count (an integer), False for seconds.
COUNTS = dict(fields.CONTENTION)


class Contention(object):
    """Cumulative contention counters of the stepping thread (create and read it there:
    run-queue delay and switches are the reading thread's) and its cgroup's throttling.
    Other work on the host shows as run-queue delay; a step that waits shows none."""

    def __init__(self):
        self.sched = ProcFile("/proc/thread-self/schedstat")
        if self.sched.fd is None:
            # Linux < 3.17: the main thread's task id is the process id.
            self.sched = ProcFile("/proc/self/task/%d/schedstat" % os.getpid())
        self.status = ProcFile("/proc/thread-self/status")
        self.cpu_stat, self.throttle_scale = cpu_stat_reader()

    def read(self):
        """(run-queue delay s, involuntary switches, (throttled s, nr_throttled), time on
        CPU s); None for any counter this kernel or cgroup does not offer."""
        rq = None
        text = self.sched.read(128)
        on = None
        if text:
            try:
                on, rq = [int(x) / 1e9 for x in text.split()[:2]]
            except (ValueError, IndexError):
                on = rq = None
        return rq, self._nivcsw(), self._throttled(), on

    def queued(self):
        """The stepping thread's run-queue delay so far (s), or None."""
        text = self.sched.read(128)
        try:
            return int(text.split()[1]) / 1e9 if text else None
        except (ValueError, IndexError):
            return None

    def _nivcsw(self):
        n = status_int(self.status.read(4096), "nonvoluntary_ctxt_switches:")
        if n is not None:
            return n
        try:
            import resource
            return resource.getrusage(getattr(resource, "RUSAGE_THREAD", 1)).ru_nivcsw
        except (ImportError, OSError, ValueError):
            return None

    def _throttled(self):
        if self.cpu_stat is None:
            return None, None
        text = self.cpu_stat.read(1024)
        seconds = count = None
        for line in (text or "").splitlines():
            parts = line.split()
            if len(parts) != 2:
                continue
            try:
                if parts[0] in ("throttled_usec", "throttled_time"):
                    seconds = int(parts[1]) * self.throttle_scale
                elif parts[0] == "nr_throttled":
                    count = int(parts[1])
            except ValueError:
                pass
        return seconds, count

    @staticmethod
    def canary(clock):
        """Seconds a fixed 1000-iteration loop takes now: the CPU's speed (a busy sibling
        or lower clock has no run-queue delay). The faster of two runs (cold caches)."""
        took = []
        for _attempt in (0, 1):
            t = clock()
            for _ in range(1000):
                pass
            took.append(clock() - t)
        return min(took)

    @staticmethod
    def delta(now, last, ref=None):
        """Per-interval differences of two read() results as sample members: seconds
        rounded to the ns, counts as integers (fields.CONTENTION)."""
        out = {} if ref is None else {"ref_s": round(ref, 9)}
        (ts, tn), (ls, ln) = now[2], last[2]
        for name, a, b in (("rq_s", now[0], last[0]), ("ivcs", now[1], last[1]),
                           ("on_s", now[3], last[3]), ("thr_s", ts, ls), ("thr_n", tn, ln)):
            if a is not None and b is not None:
                out[name] = a - b if COUNTS[name] else round(a - b, 9)
        return out


class AllThreads(object):
    """Run time and run-queue delay summed over all threads, per call: worker threads
    (TF's pool, BLAS) queueing is the step's contention too. Listed every REFRESH s."""

    REFRESH = 1.0

    def __init__(self):
        self.files = {}
        self.last = {}
        self.listed_at = None

    def _list(self, now):
        try:
            tids = os.listdir("/proc/self/task")
        except OSError:
            return
        self.listed_at = now
        for tid in tids:
            if tid not in self.files:
                self.files[tid] = ProcFile("/proc/self/task/%s/schedstat" % tid)
        for tid in [t for t in self.files if t not in tids]:
            f = self.files.pop(tid)
            self.last.pop(tid, None)
            if f.fd is not None:
                os.close(f.fd)

    def interval(self, now):
        """(run-queue delay s, run time s) of all threads since the last call."""
        if self.listed_at is None or now - self.listed_at >= self.REFRESH:
            self._list(now)
        rq = run = 0
        for tid, f in self.files.items():
            text = f.read(128)
            try:
                on, wait = [int(x) for x in text.split()[:2]]
            except (AttributeError, ValueError):
                continue
            prev = self.last.get(tid)
            self.last[tid] = (on, wait)
            if prev is not None:
                run += on - prev[0]
                rq += wait - prev[1]
        return rq / 1e9, run / 1e9



def cpu_stat_reader():
    """(ProcFile of this process's cgroup cpu.stat, seconds per unit) or (None, None)."""
    # Inside a container the cgroup namespace makes the own cgroup the mount's root.
    candidates = cgroup_cpu_stats() + [
        ("/sys/fs/cgroup/cpu.stat", 1e-6), ("/sys/fs/cgroup/cpu/cpu.stat", 1e-9),
        ("/sys/fs/cgroup/cpu,cpuacct/cpu.stat", 1e-9)]
    for path, scale in candidates:
        if not os.path.exists(path):
            continue
        reader = ProcFile(path)
        if "throttled" in (reader.read(1024) or ""):
            return reader, scale
    return None, None


def cgroup_cpu_stats():
    """[(path, seconds per unit)] of the cpu.stat files /proc/self/cgroup names (v2: usec,
    v1: ns), up to its first malformed line."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except (OSError, ValueError):
        return []
    out = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            break
        hid, ctrls, path = parts
        stat = path.rstrip("/") + "/cpu.stat"
        if hid == "0" and ctrls == "":
            out.append(("/sys/fs/cgroup" + stat, 1e-6))
        elif "cpu" in ctrls.split(","):
            out += [(mount + stat, 1e-9) for mount in ("/sys/fs/cgroup/cpu",
                                                      "/sys/fs/cgroup/cpu,cpuacct")]
    return out


# ---------------------------------------------------------------- NVML through ctypes
# Signatures and structs follow NVIDIA's NVML API reference (nvml.h). Since R510 the v1
# memory call counts the driver's reservation as used; `_v2`, where present, reports it
# apart. The activity functions are optional: skipped where a driver lacks them or says
# NOT_SUPPORTED. Clock reasons (R535+ "Event", older "Throttle", same bits): 0x1 idle,
# 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 power brake.
# HARNESS_NVML_DEVICES (NVML indices or UUIDs) restricts the readings to the cell's GPUs
# where nothing else does. In a container NVML cannot map its PIDs, so only device-level
# figures are used (one cell per GPU).
NVML_SUCCESS = 0
TEXT_SIZE = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE == NVML_DEVICE_UUID_V2_BUFFER_SIZE


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class _MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


MEMORY_V2 = ctypes.sizeof(_MemoryV2) | (2 << 24)  # NVML_STRUCT_VERSION(Memory, 2)


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


NVML_CLOCK_SM = 1
# The sample fields `activity` fills (the host's list: harness.protocol.ingest).
ACTIVITY_FIELDS = ("gpu_util", "sm_mhz", "clk_reasons")

_P = ctypes.POINTER
_SIGNATURES = {
    "nvmlInit_v2": [],
    "nvmlShutdown": [],
    "nvmlDeviceGetCount_v2": [_P(ctypes.c_uint)],
    "nvmlDeviceGetHandleByIndex_v2": [ctypes.c_uint, _P(ctypes.c_void_p)],
    "nvmlDeviceGetName": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint],
    "nvmlDeviceGetUUID": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint],
    "nvmlDeviceGetCudaComputeCapability": [ctypes.c_void_p, _P(ctypes.c_int),
                                           _P(ctypes.c_int)],
    "nvmlDeviceGetMemoryInfo": [ctypes.c_void_p, _P(_Memory)],
    "nvmlSystemGetDriverVersion": [ctypes.c_char_p, ctypes.c_uint],
}
_OPTIONAL = {
    "nvmlSystemGetCudaDriverVersion_v2": [_P(ctypes.c_int)],
    "nvmlErrorString": [ctypes.c_int],
    "nvmlDeviceGetMemoryInfo_v2": [ctypes.c_void_p, _P(_MemoryV2)],
    "nvmlDeviceGetUtilizationRates": [ctypes.c_void_p, _P(_Utilization)],
    "nvmlDeviceGetClockInfo": [ctypes.c_void_p, ctypes.c_int, _P(ctypes.c_uint)],
    "nvmlDeviceGetCurrentClocksEventReasons": [ctypes.c_void_p, _P(ctypes.c_ulonglong)],
    "nvmlDeviceGetCurrentClocksThrottleReasons": [ctypes.c_void_p, _P(ctypes.c_ulonglong)],
}


class Nvml(object):
    """Device-level NVML readings; `available` is False with `reason` when absent."""

    def __init__(self, libname="libnvidia-ml.so.1"):
        self.available = False
        self.reason = None
        self.handles = []
        self.indices = []          # NVML index of each handle (a subset when restricted)
        self.memory_api = None
        self._lib = None
        self._fn = {}
        try:
            lib = ctypes.CDLL(libname)
        except OSError as exc:
            self.reason = "cannot load %s (%s): no NVIDIA driver in this container" % (
                libname, exc)
            return
        try:
            for name, argtypes in _SIGNATURES.items():
                self._fn[name] = self._bind(lib, name, argtypes, ctypes.c_int)
        except AttributeError as exc:
            self.reason = "NVML symbol missing in %s: %s" % (libname, exc)
            return
        for name, argtypes in _OPTIONAL.items():
            restype = ctypes.c_char_p if name == "nvmlErrorString" else ctypes.c_int
            try:
                self._fn[name] = self._bind(lib, name, argtypes, restype)
            except AttributeError:
                pass
        rc = self._fn["nvmlInit_v2"]()
        if rc != NVML_SUCCESS:
            self.reason = "nvmlInit_v2 failed: %s" % self.error(rc)
            return
        count = ctypes.c_uint(0)
        rc = self._fn["nvmlDeviceGetCount_v2"](ctypes.byref(count))
        if rc != NVML_SUCCESS:
            self.reason = "nvmlDeviceGetCount_v2 failed: %s" % self.error(rc)
            self._fn["nvmlShutdown"]()
            return
        only = [x.strip() for x in os.environ.get("HARNESS_NVML_DEVICES", "").split(",")
                if x.strip()]
        for i in range(count.value):
            handle = ctypes.c_void_p()
            if self._fn["nvmlDeviceGetHandleByIndex_v2"](i, ctypes.byref(handle)) == 0:
                if only and str(i) not in only and \
                        self._text("nvmlDeviceGetUUID", handle) not in only:
                    continue
                self.handles.append(handle)
                self.indices.append(i)
        self._lib = lib
        self.available = True
        self.memory_api = "v2" if "nvmlDeviceGetMemoryInfo_v2" in self._fn else "v1"

    @staticmethod
    def _bind(lib, name, argtypes, restype):
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
        return fn

    def error(self, rc):
        """`Driver Not Loaded (9)`: NVML's own words for a return code."""
        fn = self._fn.get("nvmlErrorString")
        text = fn(rc) if fn is not None else None
        return "%s (%d)" % (text.decode("utf-8", "replace") if text else "error", rc)

    def _text(self, name, *args):
        buf = ctypes.create_string_buffer(TEXT_SIZE)
        if self._fn[name](*(args + (buf, TEXT_SIZE))) != NVML_SUCCESS:
            return None
        return buf.value.decode("utf-8", "replace")

    def devices(self):
        """[{index, name, uuid, cc: [major, minor], memory_total}] of the visible GPUs."""
        out = []
        if not self.available:
            return out
        for i, h in enumerate(self.handles):
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            cc = None
            if self._fn["nvmlDeviceGetCudaComputeCapability"](
                    h, ctypes.byref(major), ctypes.byref(minor)) == NVML_SUCCESS:
                cc = [major.value, minor.value]
            mem = self.memory_info(i)
            out.append({"index": self.indices[i], "name": self._text("nvmlDeviceGetName", h),
                        "uuid": self._text("nvmlDeviceGetUUID", h), "cc": cc,
                        "memory_total": mem["total"] if mem else None,
                        "memory_reserved": mem["reserved"] if mem else None,
                        "memory_used": mem["used"] if mem else None,
                        "memory_api": mem["api"] if mem else None})
        return out

    def driver(self):
        """The kernel driver's version string, e.g. "535.129.03", or None."""
        if not self.available:
            return None
        return self._text("nvmlSystemGetDriverVersion")

    def cuda_driver(self):
        """The newest CUDA version the driver supports, e.g. "12.2", or None."""
        fn = self._fn.get("nvmlSystemGetCudaDriverVersion_v2")
        if not self.available or fn is None:
            return None
        version = ctypes.c_int(0)
        if fn(ctypes.byref(version)) != NVML_SUCCESS:
            return None
        return "%d.%d" % (version.value // 1000, (version.value % 1000) // 10)

    def summary(self):
        """The header's `gpu` block: devices, driver and the driver's CUDA version."""
        return {"devices": self.devices(), "driver": self.driver(),
                "cuda_driver": self.cuda_driver()}

    def memory_info(self, index):
        """{total, used, reserved, api} bytes of the index-th visible device, or None;
        `_v2` first (`used` without `reserved`), else v1 (`reserved` None)."""
        if not self.available or index >= len(self.handles):
            return None
        fn = self._fn.get("nvmlDeviceGetMemoryInfo_v2")
        if fn is not None:
            mem2 = _MemoryV2()
            mem2.version = MEMORY_V2
            if fn(self.handles[index], ctypes.byref(mem2)) == NVML_SUCCESS:
                return {"total": mem2.total, "used": mem2.used, "reserved": mem2.reserved,
                        "api": "v2"}
        mem = _Memory()
        if self._fn["nvmlDeviceGetMemoryInfo"](self.handles[index],
                                               ctypes.byref(mem)) != NVML_SUCCESS:
            return None
        return {"total": mem.total, "used": mem.used, "reserved": None, "api": "v1"}

    def memory(self, index):
        """(total, used) bytes of the index-th visible device (v2 `used` where
        available), or None."""
        mem = self.memory_info(index)
        return (mem["total"], mem["used"]) if mem else None

    def used_by_device(self):
        """[used bytes or None] per visible device."""
        return [(m[1] if m else None) for m in map(self.memory, range(len(self.handles)))]

    def used(self):
        """Bytes used summed over the visible devices, or None."""
        if not self.available or not self.handles:
            return None
        per = self.used_by_device()
        return None if None in per else sum(per)

    def _ask(self, name, index, *args):
        """Whether `name` answered for the index-th device; one that fails is not asked
        again."""
        fn = self._fn.get(name)
        if fn is None:
            return False
        if fn(self.handles[index], *args) == NVML_SUCCESS:
            return True
        self._fn.pop(name, None)
        return False

    def activity(self):
        """What the visible devices did lately: {gpu_util, sm_mhz, clk_reasons} where
        NVML answered; the highest utilization, lowest clock, every reason."""
        out = {}
        if not self.available or not self.handles:
            return out
        util = _Utilization()
        clock = ctypes.c_uint(0)
        bits = ctypes.c_ulonglong(0)
        reasons = None
        for i in range(len(self.handles)):
            if self._ask("nvmlDeviceGetUtilizationRates", i, ctypes.byref(util)):
                out["gpu_util"] = max(out.get("gpu_util", 0), int(util.gpu))
            if self._ask("nvmlDeviceGetClockInfo", i, NVML_CLOCK_SM, ctypes.byref(clock)):
                mhz = int(clock.value)
                out["sm_mhz"] = min(out.get("sm_mhz", mhz), mhz)
            for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                         "nvmlDeviceGetCurrentClocksThrottleReasons"):
                if self._ask(name, i, ctypes.byref(bits)):
                    reasons = (reasons or 0) | int(bits.value)
                    break
        if reasons is not None:
            out["clk_reasons"] = reasons
        return out

    def close(self):
        if self.available:
            self._fn["nvmlShutdown"]()
            self.available = False


def main(argv):
    nvml = Nvml(argv[1] if len(argv) > 1 else "libnvidia-ml.so.1")
    out = nvml.summary() if nvml.available else {"reason": nvml.reason}
    nvml.close()
    sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    return 0 if "devices" in out else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
