"""Contention the stepping thread meets: its run-queue delay, involuntary switches and
time on a CPU, the cgroup's throttling (class Contention), the run-queue delay and run
time of all the process's threads (class AllThreads), and a canary loop timing the CPU's
speed now. Stdlib only, Python 3.6+."""
import os

import fields
from readers import ProcFile, status_int

# Contention members by name: True for a count (an integer), False for seconds.
COUNTS = dict(fields.CONTENTION)


class Contention(object):
    """Cumulative contention counters of the stepping thread and its cgroup.

    Run-queue delay (schedstat field 2: ns runnable but not running) and involuntary
    context switches belong to the thread that reads them: create and read this on the
    stepping thread. The cgroup's CPU throttling comes from cpu.stat (v2 throttled_usec,
    v1 throttled_time in ns). A host busy with other work shows as run-queue delay; a
    step that waits (sleep, lock, device) shows none, so the host can tell them apart.
    """

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
        """Seconds a fixed 1000-iteration loop takes now (~10-20 us): the CPU's speed
        at this moment. A busy hyperthread sibling or a lower clock slows every process
        by up to 1.5x with no run-queue delay at all; this is how the host sees it.

        The loop runs twice and the faster counts: run once, right after a step that
        went through MiBs of data, it read the caches the step left cold (urllib3's
        gzip reads: 14-15 us against 10-11 us warm, werkzeug's multipart parse
        +10-23 %), and the step's time put at one CPU speed came out that much
        faster, the most for the slowest release of a pair."""
        took = []
        for _attempt in (0, 1):
            t = clock()
            for _ in range(1000):
                pass
            took.append(clock() - t)
        return min(took)

    @staticmethod
    def delta(now, last, ref=None):
        """Per-interval differences of two read() results, as sample members: seconds
        rounded to the ns, counts as integers (fields.CONTENTION says which is which)."""
        out = {} if ref is None else {"ref_s": round(ref, 9)}
        (ts, tn), (ls, ln) = now[2], last[2]
        for name, a, b in (("rq_s", now[0], last[0]), ("ivcs", now[1], last[1]),
                           ("on_s", now[3], last[3]), ("thr_s", ts, ls), ("thr_n", tn, ln)):
            if a is not None and b is not None:
                out[name] = a - b if COUNTS[name] else round(a - b, 9)
        return out


class AllThreads(object):
    """Run time and run-queue delay summed over every thread of the process, per call.

    A framework's worker threads (TF's intra-op pool, BLAS) do the step's work while the
    stepping thread waits on them: their queueing is the step's contention too. Files
    stay open and the thread list is re-read at most every REFRESH s; a thread counts
    from its first reading, one that exited drops out.
    """

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
