"""The agent's output: records built as dicts, one JSON line each (class Writer), and the
sample records of this process's memory (class Sampler, also run by a timer thread).
Stdlib only, Python 3.6+."""
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
        """`stamp(record)`, where given, adds the members read last, under the lock: a
        sample's time and RSS stay in file order whichever thread wrote it. `tail()`,
        where given, is more members already encoded, in pieces (",\"dt_b64\":\"", ...),
        made after the stamp's readings and written one by one: no string of the whole
        line is made (one of 264 KB, freed, raised glibc's mmap threshold, and the next
        ones stayed in the heap: RSS levelled off 1 MiB up)."""
        line = None if stamp else _ENCODE(record)
        with self.lock:
            # The end record is the last line: a timer sample already under way when
            # the run ended would otherwise land after it (and be ignored by the host).
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
    """',"dt_b64":"..."' in pieces: the interval's step times, seconds as little-endian
    float64, in base64, made into text a chunk at a time after the sample's memory was
    read. As whole ns in a JSON list they cost ~0.2 us each to write and half that
    again to read: a marked test's 500,000 calls of a trivial step spent 0.15 s of its
    +0.28 s past its budget writing them; base64 costs ~1/12 of that. As one string,
    or one list of ints, an interval of 33,000 calls held ~1.7 MiB whose arenas the
    allocator kept: RSS rose and levelled off, a `plateau` of the agent's own (toolz's
    suite, 17 of 142 tests). What they cost grows with the calls: stepper.Stepper keeps
    it out of the sample's fixed cost (`Sampler.dt_cost`)."""
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
    """Sample records: memory by source on every sample; on step samples (taken between
    steps on the stepping thread) also the heap, framework bytes, collections, the step
    times and what the caller measured of the interval (CPU time, contention)."""

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
        """Write one sample: `dt` the step seconds since the last one, `cpu` the process
        CPU seconds of the interval, `extra` more members (contention) for a step sample.
        `settle`: the last reading before the measured phase (its starting level), which
        --heap quiet collects like every measured one."""
        r = self.readers
        # USS is costly (smaps_rollup walks the page tables): the timer thread reads it
        # every time, off the main thread; step samples only within a 0.5 % budget.
        # The time and RSS are read last, as the line is written (_stamp): a timer sample
        # that read them first and waited on the other readings (or the GIL) while the
        # stepping thread wrote later ones would land after those with an older RSS.
        rec = {"type": "sample", "src": src, "phase": self.phase, "i": self.steps_done,
               "t": None, "rss": None, "rss_anon": None,
               "uss": r.uss(force or src == "timer"), "cgroup": r.cgroup_bytes(),
               "fds": count_fds(), "threads": r.threads()}
        # The USS of the processes this one started (a pool's workers): on every sample,
        # so they are read as often, in calls, as the heap and RSS (issue 78: read on a
        # 0.5 s timer a busy host left 8 readings, and their leak was dropped); its cost
        # counts in the sample's, which sets how often a budgeted run samples. Absent
        # where it has none.
        kids = r.kids()
        if kids is not None:
            rec["kids"] = kids
        if self.nvml is not None and self.nvml.available:
            rec["gpu_used"] = self.nvml.used()
            if src == "step":
                # Utilization, SM clock and clock-event reasons: was the device busy in
                # this interval, and was its clock held down (power, heat)?
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
        # Heap and framework reads touch the allocator and the framework: only between
        # steps on the main thread, never from the timer thread.
        if self.heap is not None:
            quiet = self.collect and (settle or self.phase == "measure")
            if quiet:
                self._collect()
            heap = self.heap.read()
            if quiet:
                self._check()
            # (the step times' block, stepper.STEP_TIMES, is the same size at every
            # reading: made before the first)
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
        """The collection before a --heap quiet reading. Free lists and cycles give
        memory back only after a collection: without it a filling free list looks like
        a slow leak. The warm-up's readings are not compared (only its last one, the
        measured phase's starting level): a collection there would only cost time.

        A full collection walks every object the run kept: a leak of lists kept ~1.5 M
        of them after a 1 s budget, and one reading's collection took 0.17 s (52 of them
        8.6 s, issue 79). So each reading collects the young generations, where the
        garbage made since the last reading is; the oldest is walked after readings 1,
        2, 4, 8, ... (`_check`). A full collection also empties the free lists, which a
        young one leaves as the step keeps them: every reading is taken the same way,
        or they would read as a sawtooth of a few KiB (a 1 KiB/call leak of 300 calls
        then read `filling`)."""
        gc.collect(1 if self.young_only else 2)

    def _check(self):
        """After a --heap quiet reading: at the start of the measured phase, a full
        collection, and what lives then moved out of the collector's sight (gc.freeze,
        3.7+), so each collection there walks only the objects made since: a TensorFlow
        process's ~1 s full collection becomes one of the step's own garbage (an old
        object in a cycle freed later stays: at most once each, never growth per call).
        In the measured phase, after readings 1, 2, 4, 8, ...: a full collection, and
        where it finds cyclic garbage among old objects (a cache evicting cyclic
        entries), which a young collection would leave in the readings, every reading
        from then on collects in full."""
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
        """The heap just before and just after one full gc.collect() (the end record's
        `collected`): growth that the collection gives back was cyclic garbage, which
        the oldest generation frees in its own time, not a leak. None without a heap
        reader, or where every heap reading is collected anyway (--heap quiet)."""
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
    """Sample every `interval` s until `stop`; where one call has not returned after
    `call_timeout` s (0: never), or has run a second or more when the host's wall
    `deadline` for the whole run (s since this process started; 0: none) is DEADLINE_SHARE
    spent, end the run (`call_stuck`): the host's kill at its deadline says no line."""
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
            # (The first call only at the deadline: it may build a graph or JIT-compile
            # every kernel; but a first call that hangs says where, as a later one does.)
            call_stuck(sampler, calls + 1, now - since)


def thread_cpu():
    """This thread's CPU seconds (0.0 where the platform cannot say)."""
    try:
        return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
    except (AttributeError, OSError):
        return 0.0


# The share of the host's deadline after which a call under way ends the run here, with
# where it waits: on a busy host a call stuck from 1.5 s into a 10 s cell reached its 9 s
# --call-timeout after the host had killed the run, whose reason then named no line.
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


def call_stuck(sampler, call, waited):
    """End a run whose call `call` has not returned after `waited` s: its end record says
    so with where the stepping thread is (its stack), and the agent exits at once (the
    call cannot be interrupted from here)."""
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
