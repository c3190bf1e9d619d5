"""harness agent: run a scenario, time each step, sample memory, write JSON lines.

Stdlib only; runs on Python 3.6+ with the image's own interpreter; never imports
harness.*. Output schema 1, one JSON object per line, to --out (line-buffered) and
stdout: one "header", many "sample", one "end" (also when the scenario raises).

A scenario defines setup(params) -> state and step(state), optionally teardown(state),
fw_bytes(state) -> int (framework allocator bytes) and info(state) -> dict. A file
without setup/step is run whole, sampled by the timer thread only.

The measured loop stops early when the --control file appears (the host's live
analysis decided; looked for at each sample and every 20 ms); the end record then says
stopped_early.

Each step sample also carries what the host took from the stepping thread in that
interval (class Contention): run-queue delay `rq_s`, involuntary context switches
`ivcs`, its time on a CPU `on_s`, the cgroup's throttled time `thr_s` and periods `thr_n`, the run-queue delay
and run time summed over all the process's threads `rq_all_s`/`run_all_s` (class
AllThreads), and `ref_s`, the time of a fixed canary loop (the CPU's speed now). Where
NVML answers, step samples also carry the device's utilization `gpu_util` (percent), SM
clock `sm_mhz` and clock-event reasons `clk_reasons` (nvml.Nvml.activity).
"""
import argparse
import ctypes
import gc
import json
import os
import platform
import signal
import socket
import sys
import threading
import time
import traceback

SCHEMA = 1
MIN_SAMPLES = 30
_HERE = os.path.dirname(os.path.abspath(__file__))
ENV_KEYS = ("CUDA_VERSION", "CUDNN_VERSION", "NCCL_VERSION", "NVIDIA_TENSORFLOW_VERSION",
            "TENSORFLOW_VERSION", "NVIDIA_BUILD_ID", "NVIDIA_PYTORCH_VERSION",
            "NVIDIA_VISIBLE_DEVICES", "PYTHONMALLOC", "OMP_NUM_THREADS", "TF_CPP_MIN_LOG_LEVEL")
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class Terminated(Exception):
    """SIGTERM arrived: finish with an end record instead of dying silently."""


# ---------------------------------------------------------------- memory readers
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


class Readers(object):
    """All per-sample readings of this process. USS walks every page table entry
    (smaps_rollup costs ~0.3-1 ms), so it is re-read only when the time since the last
    read is at least USS_BUDGET times its cost: its overhead stays under 0.1 %."""

    USS_BUDGET = 1000.0

    def __init__(self):
        self.statm = ProcFile("/proc/self/statm")
        self.status = ProcFile("/proc/self/status")
        self.smaps = ProcFile("/proc/self/smaps_rollup")
        self.cg_version, path = cgroup_reader()
        self.cgroup = ProcFile(path) if path else ProcFile("/nonexistent")
        self.uss_cost = 0.0
        self.uss_at = None
        self.lock = threading.Lock()

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

    def uss(self, force=False):
        """Private_Clean + Private_Dirty (+ Hugetlb) bytes, or None when skipped."""
        now = time.monotonic()
        with self.lock:
            if not force and self.uss_at is not None and (
                    now - self.uss_at) < self.USS_BUDGET * self.uss_cost:
                return None
            self.uss_at = now
        text = self.smaps.read(8192)
        if not text:
            return None
        total = 0
        for line in text.splitlines():
            if line.startswith(("Private_Clean:", "Private_Dirty:", "Private_Hugetlb:")):
                try:
                    total += int(line.split()[1]) * 1024
                except (ValueError, IndexError):
                    return None
        self.uss_cost = time.monotonic() - now
        return total

    def cgroup_bytes(self):
        text = self.cgroup.read(64)
        try:
            return int(text.strip()) if text else None
        except ValueError:
            return None

    def threads(self):
        n = status_int(self.status.read(4096), "Threads:")
        return threading.active_count() if n is None else n


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


# ---------------------------------------------------------------- contention
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
        by up to 1.5x with no run-queue delay at all; this is how the host sees it."""
        t = clock()
        for _ in range(1000):
            pass
        return clock() - t

    @staticmethod
    def delta(now, last, ref=None):
        """Per-interval differences of two read() results, as JSON members."""
        out = "" if ref is None else ',"ref_s":%.9f' % ref
        names = ("rq_s", "ivcs")
        for name, a, b in zip(names, now[:2], last[:2]):
            if a is not None and b is not None:
                out += (',"%s":%.9f' % (name, a - b)) if name == "rq_s" else (
                    ',"%s":%d' % (name, a - b))
        if now[3] is not None and last[3] is not None:
            out += ',"on_s":%.9f' % (now[3] - last[3])
        (ts, tn), (ls, ln) = now[2], last[2]
        if ts is not None and ls is not None:
            out += ',"thr_s":%.9f' % (ts - ls)
        if tn is not None and ln is not None:
            out += ',"thr_n":%d' % (tn - ln)
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


class ControlCheck(object):
    """Whether the host's stop file has appeared: looked at on every sample point and
    at least every INTERVAL s between them, so a slow step stops within a call or two.

    A stat costs ~2 us; the clock comparison made on every step costs ~0.1 us."""

    INTERVAL = 0.02

    def __init__(self, path):
        self.path = path
        self.next_at = 0.0

    def due(self, now, sample_point=False):
        if not self.path or (now < self.next_at and not sample_point):
            return False
        self.next_at = now + self.INTERVAL
        return os.path.exists(self.path)


def cpu_stat_reader():
    """(ProcFile of this process's cgroup cpu.stat, seconds per unit) or (None, None)."""
    candidates = []
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                hid, ctrls, path = line.rstrip("\n").split(":", 2)
                if hid == "0" and ctrls == "":
                    candidates.append(("/sys/fs/cgroup" + path.rstrip("/") + "/cpu.stat", 1e-6))
                elif "cpu" in ctrls.split(","):
                    for mount in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"):
                        candidates.append((mount + path.rstrip("/") + "/cpu.stat", 1e-9))
    except (OSError, ValueError):
        pass
    # Inside a container the cgroup namespace makes the own cgroup the mount's root.
    candidates += [("/sys/fs/cgroup/cpu.stat", 1e-6), ("/sys/fs/cgroup/cpu/cpu.stat", 1e-9),
                   ("/sys/fs/cgroup/cpu,cpuacct/cpu.stat", 1e-9)]
    for path, scale in candidates:
        if os.path.exists(path):
            reader = ProcFile(path)
            text = reader.read(1024) or ""
            if "throttled" in text:
                return reader, scale
    return None, None


# ---------------------------------------------------------------- output
class Writer(object):
    """Line-buffered JSON lines to a file and stdout, serialised across threads."""

    def __init__(self, path, echo=True):
        self.lock = threading.Lock()
        self.file = open(path, "a", buffering=1) if path else None
        self.echo = echo
        self.ended = False

    def write(self, record, tail=""):
        """`tail` is pre-serialised JSON members (',"dt":[...]') appended to the object."""
        line = json.dumps(record, separators=(",", ":"), default=str)
        if tail:
            line = line[:-1] + tail + "}"
        with self.lock:
            # The end record is the last line: a timer sample already under way when
            # the run ended would otherwise land after it (and be ignored by the host).
            if self.ended:
                return
            self.ended = record.get("type") == "end"
            if self.file is not None:
                self.file.write(line + "\n")
            if self.echo:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

    def close(self):
        with self.lock:
            if self.file is not None:
                self.file.flush()
                os.fsync(self.file.fileno())
                self.file.close()
                self.file = None


# ---------------------------------------------------------------- sampler
class Sampler(object):
    def __init__(self, writer, heap_enabled=True):
        self.writer = writer
        self.heap = Heap() if heap_enabled else None
        self.readers = Readers()
        self.cg_version = self.readers.cg_version
        self.nvml = None
        self.t0 = time.monotonic()
        self.steps_done = 0
        self.phase = "setup"
        self.state = None
        self.fw = None
        self.collect = False

    def start_nvml(self):
        sys.path.insert(0, _HERE)
        try:
            import nvml  # noqa: the agent's own sibling module
            self.nvml = nvml.Nvml(os.environ.get("HARNESS_NVML_LIB", "libnvidia-ml.so.1"))
        finally:
            sys.path.pop(0)

    def snapshot(self, src, dt=None, force=False, cpu=None, extra=""):
        r = self.readers
        # USS is costly (smaps_rollup walks the page tables): the timer thread reads it
        # every time, off the main thread; step samples only within a 0.5 % budget.
        rss, rss_anon = r.rss_and_anon()
        rec = {"type": "sample", "src": src, "phase": self.phase, "i": self.steps_done,
               "t": round(time.monotonic() - self.t0, 6), "rss": rss, "rss_anon": rss_anon,
               "uss": r.uss(force or src == "timer"), "cgroup": r.cgroup_bytes(),
               "fds": count_fds(), "threads": r.threads()}
        if self.nvml is not None and self.nvml.available:
            rec["gpu_used"] = self.nvml.used()
            if src == "step":
                # Utilization, SM clock and clock-event reasons: was the device busy in
                # this interval, and was its clock held down (power, heat)?
                rec.update(self.nvml.activity())
        if src == "step":
            # Heap and framework reads touch the allocator and the framework: only
            # between steps on the main thread, never from the timer thread.
            if self.heap is not None:
                if self.collect:
                    # Free-lists and cycles give memory back only after a collection:
                    # without it a filling free-list looks like a slow leak.
                    gc.collect()
                rec["heap"] = self.heap.read()
            if self.fw is not None:
                try:
                    value = self.fw(self.state)
                    rec["fw"] = int(value) if value is not None else None
                except Exception as exc:  # a broken fw_bytes must not kill the run
                    rec["fw_error"] = repr(exc)[:200]
                    self.fw = None
            rec["gc"] = sum(s.get("collections", 0) for s in gc.get_stats())
            # Step times are most of a sample line; "%.9f" formatting costs a third of
            # round() + json for them (measured), which matters at a sample per ms.
            tail = ',"dt":[' + ",".join(["%.9f" % x for x in dt or ()]) + "]"
            if cpu is not None:
                tail += ',"cpu_s":%.9f' % cpu
            self.writer.write(rec, tail + extra)
            return
        self.writer.write(rec)


def timer_loop(sampler, interval, stop):
    while not stop.wait(interval):
        try:
            sampler.snapshot("timer")
        except Exception:  # sampling must never take the run down
            pass


# ---------------------------------------------------------------- fingerprint
def installed_packages():
    """{name: version} from *.dist-info / *.egg-info on sys.path (no importlib.metadata on 3.6)."""
    found = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            for suffix in (".dist-info", ".egg-info"):
                if name.endswith(suffix):
                    stem = name[: -len(suffix)]
                    pkg, _, version = stem.partition("-")
                    if pkg and version:
                        found.setdefault(pkg.lower().replace("_", "-"), version.split("-")[0])
    return found


def header(args, sampler, params):
    gpu = None
    gpu_reason = None
    if sampler.nvml is not None:
        if sampler.nvml.available:
            gpu = sampler.nvml.summary()
        else:
            gpu_reason = sampler.nvml.reason
    heap = sampler.heap
    return {"type": "header", "schema": SCHEMA, "scenario": args.scenario, "params": params,
            "config": {"iterations": args.iterations, "warmup": args.warmup,
                       "sample_every": args.sample_every, "sample_interval": args.sample_interval},
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(),
            "hostname": socket.gethostname(), "pid": os.getpid(), "time": time.time(),
            "env": dict((k, os.environ[k]) for k in ENV_KEYS if k in os.environ),
            "packages": installed_packages(),
            "heap": {"func": heap.func if heap else None, "note": heap.note if heap else
                     "disabled"},
            "pythonmalloc": os.environ.get("PYTHONMALLOC"),
            "cgroup": sampler.cg_version, "gpu": gpu, "gpu_reason": gpu_reason,
            "cpu_count": os.cpu_count()}


def load_scenario(path):
    """Import the scenario file as a module named after it."""
    import importlib.util
    name = "harness_scenario_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot import scenario %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- run
def run(args):
    params = json.loads(args.params) if args.params else {}
    writer = Writer(args.out, echo=not args.quiet)
    sampler = Sampler(writer, heap_enabled=not args.no_heap)
    sampler.collect = args.collect
    if not args.no_gpu:
        sampler.start_nvml()
    writer.write(header(args, sampler, params))
    stop_timer = threading.Event()
    timer = threading.Thread(target=timer_loop, args=(sampler, args.sample_interval, stop_timer))
    timer.daemon = True
    timer.start()
    phases = {}
    end = {"type": "end", "status": "ok", "warmup": 0, "iterations": 0, "stopped_early": False}
    module = state = None
    started = time.monotonic()

    def on_term(signum, frame):
        raise Terminated("signal %d" % signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        t = time.monotonic()
        if not has_protocol(args.scenario):
            end["mode"] = "script"
            sampler.phase = "script"
            run_script(args)
            phases["script"] = time.monotonic() - t
        else:
            sampler.phase = "import"
            module = load_scenario(args.scenario)
            phases["import"] = time.monotonic() - t
            end["mode"] = "steps"
            t = time.monotonic()
            sampler.phase = "setup"
            state = module.setup(params)
            sampler.state = state
            sampler.fw = getattr(module, "fw_bytes", None)
            phases["setup"] = time.monotonic() - t
            sampler.snapshot("step", force=True)
            step = module.step
            clock = time.perf_counter
            # Process CPU time per sample interval tells a real slowdown (more work)
            # from a busy host (same work, less CPU for us): contention stretches wall
            # time only. Read at sample points, not per step: it is a syscall (~1 us).
            cpu_clock = time.process_time
            every = args.sample_every
            contention = Contention()
            threads = AllThreads()
            control = ControlCheck(args.control)
            budget = args.max_overhead if args.max_overhead > 0 else float("inf")
            sampling = 0.0
            for phase, count in (("warmup", args.warmup), ("measure", args.iterations)):
                sampler.phase = phase
                t = time.monotonic()
                dts = []
                cpu_last = cpu_clock()
                cont_last = contention.read()
                threads.interval(clock())
                done = 0
                since = 0.0     # step seconds since the last sample
                gap = 0         # steps since the last sample
                cost = 0.0      # what the last sample cost
                cap = max(every, count // MIN_SAMPLES)
                while done < count:
                    t1 = clock()
                    step(state)
                    t2 = clock()
                    dts.append(t2 - t1)
                    done += 1
                    sampler.steps_done += 1
                    since += t2 - t1
                    gap += 1
                    # Sample every `every` steps, but no more often than keeps the
                    # agent's own cost under --max-overhead of the step time, and never
                    # so rarely that a phase yields fewer than MIN_SAMPLES samples.
                    # The control file is looked at on a timer too, so a live decision
                    # stops the run within a few calls, not at the next sample.
                    stop_now = phase == "measure" and control.due(t2, done % every == 0)
                    if stop_now or done % every == 0 or done == count:
                        if stop_now or done == count or since * budget >= cost or gap >= cap:
                            t2 = clock()
                            cpu_now = cpu_clock()
                            cont_now = contention.read()
                            ref = Contention.canary(clock)
                            rq_all, run_all = threads.interval(t2)
                            extra = Contention.delta(cont_now, cont_last, ref)
                            extra += ',"rq_all_s":%.9f,"run_all_s":%.9f' % (rq_all, run_all)
                            sampler.snapshot("step", dts, cpu=cpu_now - cpu_last, extra=extra)
                            cost = clock() - t2
                            cpu_last = cpu_clock()  # the sample's own CPU is left out
                            cont_last = contention.read()
                            sampling += cost
                            since = 0.0
                            gap = 0
                            dts = []
                        if stop_now:
                            end["stopped_early"] = True
                            break
                end[phase if phase == "warmup" else "iterations"] = done
                phases[phase] = time.monotonic() - t
                if phase == "measure":
                    # The agent's own cost inside the measured phase (between steps).
                    end["sampling_s"] = round(sampling, 6)
                sampling = 0.0
            info = getattr(module, "info", None)
            if info is not None:
                end["info"] = info(state)
    except SystemExit as exc:
        # A script's sys.exit(N): N != 0 is a failure the end record must say, not "ok".
        if exc.code not in (None, 0):
            end["status"] = "error"
            end["error"] = {"type": "SystemExit", "message": str(exc.code)[:2000],
                            "traceback": traceback.format_exc()[-20000:]}
    except (Exception, KeyboardInterrupt, Terminated) as exc:
        end["status"] = "error"
        end["error"] = {"type": type(exc).__name__, "message": str(exc)[:2000],
                        "traceback": traceback.format_exc()[-20000:]}
        # agent.log (the cell's stderr) shows where the scenario raised, as Python would.
        sys.stderr.write(end["error"]["traceback"])
        sys.stderr.flush()
    finally:
        teardown = getattr(module, "teardown", None) if module is not None else None
        if teardown is not None and state is not None:
            t = time.monotonic()
            try:
                teardown(state)
            except Exception as exc:
                end.setdefault("teardown_error", repr(exc)[:2000])
            phases["teardown"] = time.monotonic() - t
        stop_timer.set()
        if sampler.nvml is not None:
            try:
                sampler.nvml.close()
            except Exception:
                pass
        end["phases"] = dict((k, round(v, 6)) for k, v in phases.items())
        end["elapsed_s"] = round(time.monotonic() - started, 6)
        writer.write(end)
        writer.close()
    return 0 if end["status"] == "ok" else 1


def has_protocol(path):
    """True when the file defines top-level setup() and step()."""
    import ast
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    names = set(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
    return "setup" in names and "step" in names


def run_script(args):
    """A plain script: run it whole under the timer sampler."""
    import runpy
    sys.argv = [args.scenario]
    runpy.run_path(args.scenario, run_name="__main__")


def parse_args(argv):
    p = argparse.ArgumentParser(description="harness in-container agent")
    p.add_argument("--scenario", required=True)
    p.add_argument("--params", default="{}", help="JSON object of scenario params")
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--sample-every", type=int, default=10)
    p.add_argument("--sample-interval", type=float, default=0.5)
    p.add_argument("--out", default=None, help="JSON lines file (appended, line-buffered)")
    p.add_argument("--control", default=None, help="stop measuring when this file appears")
    p.add_argument("--no-heap", action="store_true", help="skip mallinfo/malloc_trim")
    p.add_argument("--max-overhead", type=float, default=0.01,
                   help="stretch the sampling interval so sampling costs at most this "
                        "share of the step time (0: always every --sample-every steps)")
    p.add_argument("--collect", action="store_true",
                   help="gc.collect() before each heap reading (early-stop mode)")
    p.add_argument("--no-gpu", action="store_true", help="skip NVML")
    p.add_argument("--quiet", action="store_true", help="do not echo records to stdout")
    args = p.parse_args(argv)
    if args.sample_every < 1 or args.iterations < 0 or args.warmup < 0:
        p.error("--sample-every must be >= 1, --iterations/--warmup >= 0")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
