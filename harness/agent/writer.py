"""The agent's output: records as JSON lines (Writer) and memory samples (Sampler, also
run by a timer thread). Stdlib only, Python 3.6+."""
import array
import gc
import json
import os
import sys
import threading
import time
from base64 import b64encode

from readers import Heap, Nvml, Readers, count_fds

# One encoder for every line (json.dumps with options makes a new one per call).
_ENCODE = json.JSONEncoder(separators=(",", ":"), default=str).encode


class Writer(object):
    """Line-buffered JSON lines to a file and stdout, serialised across threads."""

    def __init__(self, path, echo=True, sync=True):
        self.lock = threading.Lock()
        self.sync = sync    # False: its directory is thrown away after the run
        self.file = open(path, "a", buffering=1) if path else None
        self.echo = echo
        self.ended = False

    def write(self, record, stamp=None, tail=None):
        """Write one record as a JSON line. `stamp(record)` adds the members read last,
        under the lock, to keep file order; `tail()` yields more encoded members, written
        piece by piece (no large string, which would move glibc's mmap threshold)."""
        line = None if stamp else _ENCODE(record)
        with self.lock:
            # The end record is the last line; a late timer sample is dropped.
            if self.ended:
                return
            if stamp:
                stamp(record)
                line = _ENCODE(record)
            head = line + "\n" if tail is None else line[:-1]
            self.ended = record.get("type") == "end"
            outs = [f for f in (self.file, sys.stdout if self.echo else None) if f is not None]
            for out in outs:
                out.write(head)
            if tail is not None:
                for piece in tail():
                    for out in outs:
                        out.write(piece)
                for out in outs:
                    out.write("}\n")
            if self.echo:
                sys.stdout.flush()

    def close(self):
        with self.lock:
            if self.file is not None:
                self.file.flush()
                if self.sync:
                    os.fsync(self.file.fileno())
                self.file.close()
                self.file = None


# Step times are made into text this many at a time: 24,576 bytes, a multiple of 3, so
# the pieces' base64 is the whole's.
_CHUNK = 3072
_SWAP = sys.byteorder != "little"


def step_times(dt):
    """',"dt_b64":"..."' in pieces: the interval's step times as little-endian float64 in
    base64, a chunk at a time: far cheaper than a JSON list, and no large string whose
    arenas the allocator would keep. Its cost grows with the calls (`Sampler.dt_cost`)."""
    yield ',"dt_b64":"'
    if dt is not None and len(dt):
        if not isinstance(dt, memoryview) or dt.format != "d":
            dt = memoryview(array.array("d", dt))
        for k in range(0, len(dt), _CHUNK):
            piece = dt[k:k + _CHUNK]
            if _SWAP:
                piece = array.array("d", piece)
                piece.byteswap()
            yield b64encode(piece).decode("ascii")
    yield '"'


class Sampler(object):
    """Sample records: memory by source on every sample; on step samples (between steps,
    on the stepping thread) also heap, framework bytes, collections, step times and the
    interval's CPU time and contention."""

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
        # The timer thread's own CPU seconds so far (`timer_loop`): a step sample's CPU
        # time is the process's less this, the agent's readings off the stepping thread.
        self.timer_cpu = 0.0
        self.measured = 0       # the measured phase's heap readings so far
        self.young_only = True  # no cyclic garbage among old objects found (_collect)
        self.dt_cost = 0.0      # the last step sample's cost of its step times (estimated)

    def start_nvml(self):
        self.nvml = Nvml(os.environ.get("HARNESS_NVML_LIB", "libnvidia-ml.so.1"))

    def snapshot(self, src, dt=None, force=False, cpu=None, extra=None, settle=False):
        """Write one sample (`src` "step" or "timer"): `dt` the step seconds since the last,
        `cpu` the interval's CPU seconds, `extra` contention members, `settle` the last
        reading before the measured phase (--heap quiet collects it like a measured one)."""
        r = self.readers
        # USS walks the page tables: every timer sample, step samples within a budget.
        # Time and RSS are read last, as the line is written (_stamp), to keep file order.
        rec = {"type": "sample", "src": src, "phase": self.phase, "i": self.steps_done,
               "t": None, "rss": None, "rss_anon": None,
               "uss": r.uss(force or src == "timer"), "cgroup": r.cgroup_bytes(),
               "fds": count_fds(), "threads": r.threads()}
        # The USS of this process's children, on every sample so they are read as often
        # as the heap; absent where there are none.
        kids = r.kids()
        if kids is not None:
            rec["kids"] = kids
        if self.nvml is not None and self.nvml.available:
            rec["gpu_used"] = self.nvml.used()
            if src == "step":
                # Was the device busy, and its clock held down (power, heat)?
                rec.update(self.nvml.activity())
        if src == "step":
            self._step_members(rec, dt, cpu, settle)
            if extra:
                rec.update(extra)
            t = time.perf_counter()
            self.writer.write(rec, self._stamp, lambda: step_times(dt))
            self.dt_cost = time.perf_counter() - t     # the line is mostly step times
            return
        self.writer.write(rec, self._stamp)

    def _stamp(self, rec):
        rec["t"] = round(time.monotonic() - self.t0, 6)
        rec["rss"], rec["rss_anon"] = self.readers.rss_and_anon()
        rec["i"] = self.steps_done

    def _step_members(self, rec, dt, cpu, settle=False):
        # Heap and framework reads touch the allocator: main thread, between steps only.
        if self.heap is not None:
            quiet = self.collect and (settle or self.phase == "measure")
            if quiet:
                self._collect()
            heap = self.heap.read()
            if quiet:
                self._check()
            rec["heap"] = heap
        if self.fw is not None:
            try:
                value = self.fw(self.state)
                rec["fw"] = int(value) if value is not None else None
            except Exception as exc:  # a broken fw_bytes must not kill the run
                rec["fw_error"] = repr(exc)[:200]
                self.fw = None
        rec["gc"] = sum(s.get("collections", 0) for s in gc.get_stats())
        if cpu is not None:
            rec["cpu_s"] = round(cpu, 9)


    def _collect(self):
        """The collection before a --heap quiet reading, or free lists and cycles look
        like a slow leak: the young generations each time (a full one is too slow), the
        oldest after readings 1, 2, 4, 8, ... (`_check`), every reading alike."""
        gc.collect(1 if self.young_only else 2)

    def _check(self):
        """After a --heap quiet reading: before the measured phase a full collection and
        gc.freeze (3.7+); in it, a full one after readings 1, 2, 4, 8, ..., and every
        reading in full once one finds cyclic garbage among old objects."""
        if self.phase != "measure":     # (outside it, only a settling reading collects)
            gc.collect()
            self.measured, self.young_only = 0, True
            if hasattr(gc, "freeze"):
                gc.freeze()
            return
        self.measured += 1
        k = self.measured
        if self.young_only and not k & (k - 1) and gc.collect():
            self.young_only = False

    def collected(self):
        """The heap just before and after one full gc.collect() (the end record's
        `collected`): growth it gives back was cyclic garbage, not a leak. None without a
        heap reader or under --heap quiet."""
        if self.heap is None or self.collect:
            return None
        before = self.heap.read()
        t = time.monotonic()
        freed = gc.collect()
        after = self.heap.read()
        if before is None or after is None:
            return None
        return {"heap": before, "heap_after": after, "objects": freed,
                "s": round(time.monotonic() - t, 6)}


def timer_loop(sampler, interval, stop, call_timeout=0.0, deadline=0.0):
    """Sample every `interval` s until `stop`; end the run (`call_stuck`) where a call has
    not returned after `call_timeout` s, or runs at DEADLINE_SHARE of the host's
    `deadline`, whose own kill would say no line (0: never)."""
    calls, since = -1, time.monotonic()
    born = since - (process_age() or 0.0)
    started = thread_cpu()
    while not stop.wait(interval):
        try:
            sampler.snapshot("timer")
        except Exception:  # sampling must never take the run down
            pass
        sampler.timer_cpu = thread_cpu() - started
        now = time.monotonic()
        if sampler.steps_done != calls or sampler.phase not in ("warmup", "measure"):
            calls, since = sampler.steps_done, now
        elif calls >= 0 and not stop.is_set() and (
                (calls > 0 and call_timeout > 0 and now - since >= call_timeout)
                or (deadline > 0 and now - born >= DEADLINE_SHARE * deadline
                    and now - since >= 1.0)):
            # The first call only at the deadline: it may compile; a hang still says where.
            call_stuck(sampler, calls + 1, now - since)


def thread_cpu():
    """This thread's CPU seconds (0.0 where the platform cannot say)."""
    try:
        return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
    except (AttributeError, OSError):
        return 0.0


# The share of the host's deadline after which a stuck call ends the run here, saying
# where it waits, before the host's kill (which names no line).
DEADLINE_SHARE = 0.9


def process_age():
    """Seconds since this process started, as the kernel counts them (None off Linux)."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return max(0.0, up - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def main_queued():
    """The main thread's run-queue delay since the process started (s): time the host gave
    to other work while this process could run. None off Linux."""
    try:
        with open("/proc/self/task/%d/schedstat" % os.getpid()) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def call_stuck(sampler, call, waited):
    """End a run whose call `call` has not returned after `waited` s: the end record says
    so with the stepping thread's stack, and the agent exits at once (the call cannot be
    interrupted)."""
    import traceback

    frames = sys._current_frames()
    main = threading.main_thread() if hasattr(threading, "main_thread") else None
    frame = frames.get(main.ident) if main is not None else None
    stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
    sampler.writer.write({
        "type": "end", "status": "error", "iterations": 0,
        "error": {"type": "CallTimeout", "phase": sampler.phase, "call": call,
                  "message": "call %d did not return after %.0f s (the agent's "
                             "--call-timeout)" % (call, waited),
                  "traceback": "The stepping thread, where it waits:\n" + stack[-20000:]}})
    sampler.writer.close()
    os._exit(1)
