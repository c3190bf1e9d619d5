"""Attribution for the measured phase (--attribute KINDS): where the memory and time went.

`make(...).measure_end` returns the "where" record: heap (with worker processes), stack, ops,
device (CUDA allocator), native (memray). Stdlib, Python 3.6+; failures go to "errors"."""

import dis
import json
import os
import sys
import tempfile
import threading
import time
import warnings


# ---------------------------------------------------------------- what the parts share
def _protocol_kinds():
    """fields.WHERE_KINDS, loaded by path: a scenario may have a module `fields` of its own."""
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("_harness_agent_fields", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "fields.py"))
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.WHERE_KINDS)


KINDS = _protocol_kinds()
FRAMES = 25          # traceback depth: enough to reach the scenario's line
KEEP_FRAMES = 12     # frames kept per site, innermost first
TOP = 50
UNAVAILABLE = "memray is not importable in this image"

STEP_CALLER = "stepper.py"   # the agent's module that calls the scenario's step()
_AGENT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _step_lines():
    """The lines of stepper.py that call step(state): only frames below them are the
    scenario's (stepper.py also runs the agent's own stop-file check and sampler)."""
    try:
        with open(os.path.join(_AGENT_DIR, STEP_CALLER)) as f:
            return frozenset(i for i, text in enumerate(f, 1) if text.strip() == "step(state)")
    except OSError:
        return frozenset()


STEP_LINES = _step_lines()
_SKIP_BASENAMES = ("threading.py", "tracemalloc.py")


def _env_number(name, default, kind=float):
    try:
        value = kind(os.environ.get(name, default))
        return value if value > 0 else default
    except ValueError:
        return default


def _why(exc):
    return ("%s: %s" % (type(exc).__name__, exc))[:300]


# This module (the TF1 wrapper sits between scenario and session): left out, not cut at.
_OWN = ("attribution",)


def frame_class(path):
    """0: keep; 1: leave out (threading, tracemalloc, this module); 2: the agent: stop."""
    if not path:
        return 0
    full = os.path.abspath(path)
    own = (full.startswith(_AGENT_DIR)
           and os.path.splitext(os.path.basename(full))[0] in _OWN)
    if own or os.path.basename(full) in _SKIP_BASENAMES:
        return 1
    return 2 if full.startswith(_AGENT_DIR) else 0


def is_agent_file(path):
    return frame_class(path) != 0


def trim(frames):
    """Innermost-first [file, line, func] frames -> the scenario's part, KEEP_FRAMES at most.

    Empty when the first agent frame is not the stepper's step call (the agent's own).
    """
    out = []
    for fr in frames:
        c = frame_class(fr[0])
        if c == 2:
            return out if (os.path.basename(fr[0]) == STEP_CALLER
                           and fr[1] in STEP_LINES) else []
        if c == 0 and len(out) < KEEP_FRAMES:
            out.append([fr[0], fr[1], fr[2]])
    return out


def grown_sites(stats, cut, names):
    """tracemalloc `compare_to(..., "traceback")` stats -> the TOP grown sites, largest
    first, by the frames `cut` keeps (empty: not the scenario's). `names`: a `_FuncNames`."""
    # 3.7+: a Traceback iterates oldest first; 3.6: most recent first.
    newest_last = sys.version_info >= (3, 7)
    sites = {}
    for st in stats:
        if st.size_diff <= 0:
            continue
        raw = [(f.filename, f.lineno) for f in st.traceback]
        if newest_last:
            raw.reverse()
        frames = cut(raw)
        if not frames:
            continue
        acc = sites.setdefault(tuple((f[0], f[1]) for f in frames), [0, 0])
        acc[0] += st.size_diff
        acc[1] += st.count_diff
    top = sorted(sites.items(), key=lambda kv: -kv[1][0])[:TOP]
    return [{"size": v[0], "count": v[1],
             "frames": [[f, ln, names.name(f, ln)] for f, ln in k]} for k, v in top]


class _FuncNames(object):
    """(file, line) -> function name for tracemalloc frames, from the file's code objects."""

    def __init__(self):
        self.files = {}

    def name(self, path, line):
        table = self.files.get(path)
        if table is None:
            table = self.files[path] = self._table(path)
        return table.get(line, "?")

    @staticmethod
    def _table(path):
        table = {}
        try:
            with open(path, "rb") as f:
                code = compile(f.read(), path, "exec", dont_inherit=True)
        except Exception:  # C module, <string>, unreadable: names stay "?"
            return table
        todo = [(code, "")]
        while todo:
            co, outer = todo.pop()
            name = qualname(co, outer)
            for _, line in dis.findlinestarts(co):
                if line is not None:
                    table[line] = name  # nested code comes later and overrides
            inner = name if co is not code else ""   # a module's own code is no scope
            todo.extend((c, inner) for c in co.co_consts if hasattr(c, "co_code"))
        return table


INNER = ("<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>")


def qualname(co, outer):
    """The code's qualified name; before 3.11, a comprehension's or lambda's is made as
    3.11 makes it (`step.<locals>.<genexpr>`), so the host names sites alike."""
    name = getattr(co, "co_qualname", None)
    if name is not None:
        return name
    if outer and co.co_name in INNER:
        return outer + ".<locals>." + co.co_name
    return co.co_name


# ---------------------------------------------------------------- windows
class Windows(object):
    """Early: steps [0, q); late: [count - q, count); q = a quarter of the planned steps.
    With a time `budget`, each window is the later of the budget's quarter in time and
    `least`'s in steps; `span` bounds the early window."""

    def __init__(self, count, span=None, budget=0.0, least=0, clock=time.perf_counter):
        q = max(1, count // 4)
        if span is not None:
            q = max(1, min(q, span))
        self.count = count
        self.early = (0, min(q, count))
        self.late = (max(0, count - q), count)
        self.budget = budget or 0.0
        self.least = least or 0
        self.clock = clock
        self.started = clock()
        self.seen = {}      # budget: window -> [first step, last step] seen in it

    def which(self, i):
        if self.budget > 0:
            return self._in_time(i)
        if self.early[0] <= i < self.early[1]:
            return "early"
        if self.late[0] <= i < self.late[1]:
            return "late"
        return None

    def _in_time(self, i):
        t = self.clock() - self.started
        if (t < self.budget / 4 or i < self.least // 4) and i < self.early[1]:
            w = "early"
        elif self.late_started(i):
            w = "late"
        else:
            w = None
        if w is not None:
            seen = self.seen.setdefault(w, [i, i])
            seen[1] = max(seen[1], i)
        return w

    def late_started(self, done):
        """Whether the late window has begun, `done` steps in."""
        if self.budget > 0:
            return (self.clock() - self.started >= self.budget * 3 / 4
                    and done >= self.least - self.least // 4)
        return done >= self.late[0]

    def short(self, done):
        """Why the run stopped before its late window ended, or None."""
        if self.budget > 0:
            if "late" in self.seen or self.late_started(done):
                return None
            return ("the run stopped at step %d, %.2f s in, before its late window (from "
                    "%.2f s of its %g s budget and step %d)" % (
                        done, self.clock() - self.started, self.budget * 3 / 4, self.budget,
                        self.least - self.least // 4))
        if done < self.late[1]:
            return "the run stopped at step %d, before the end of the late window (%d..%d)" % (
                done, self.late[0], self.late[1])
        return None

    def describe(self, extra):
        if self.budget > 0:
            out = {}
            for w, (a, b) in ((w, self.seen.get(w, [0, -1])) for w in ("early", "late")):
                # The early window starts with the phase; otherwise the steps sampled.
                out[w] = dict({"from": 0 if w == "early" else a, "to": b + 1}, **extra[w])
            out["budget_s"] = self.budget
            return out
        return {"early": dict({"from": self.early[0], "to": self.early[1]}, **extra["early"]),
                "late": dict({"from": self.late[0], "to": self.late[1]}, **extra["late"])}


class Part(object):
    """A part: at_sample (windowed parts only), close (no record), end (its record)."""

    on = False

    def at_sample(self, done):
        pass


# Memory: heap, device, native; a framework is read only when the scenario imported it.
# ---------------------------------------------------------------- heap
class HeapPart(Part):
    def __init__(self, ctx):
        import tracemalloc
        self.tm = tracemalloc
        self.owned = not tracemalloc.is_tracing()
        if self.owned:
            tracemalloc.start(FRAMES)
        self.frames = tracemalloc.get_traceback_limit()
        t = time.perf_counter()
        self.traced_start = tracemalloc.get_traced_memory()[0]
        if hasattr(tracemalloc, "reset_peak"):  # 3.9+
            tracemalloc.reset_peak()
        self.start = tracemalloc.take_snapshot()
        self.overhead = time.perf_counter() - t


    def end(self, done):
        tm = self.tm
        t = time.perf_counter()
        try:
            end = tm.take_snapshot()
            traced_end, peak = tm.get_traced_memory()
        finally:
            if self.owned:
                tm.stop()
        stats = end.compare_to(self.start, "traceback")
        self.start = end = None
        out = grown_sites(stats, lambda raw: trim([(f, ln, None) for f, ln in raw]),
                          _FuncNames())
        self.overhead += time.perf_counter() - t
        return {"traced_start": self.traced_start, "traced_end": traced_end, "peak": peak,
                "frames": self.frames, "sites": out, "overhead_s": round(self.overhead, 6)}

    def close(self):
        if self.owned and self.tm.is_tracing():
            self.tm.stop()


# ---------------------------------------------------------------- device: torch CUDA
class DevicePart(Part):
    def __init__(self, ctx):
        torch = sys.modules.get("torch")
        if torch is None:
            if "jax" in sys.modules and "tensorflow" not in sys.modules:
                raise RuntimeError("JAX device memory is not attributed (only PyTorch's "
                                   "CUDA allocator history is read)")
            raise RuntimeError("torch is not imported by the scenario")
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        self.mem = torch.cuda.memory
        self.entries = _env_number("HARNESS_DEVICE_ENTRIES", 100000, int)
        try:
            self.mem._record_memory_history(enabled="all", context="alloc", stacks="python",
                                            max_entries=self.entries)
            self.old_api = False
        except TypeError:  # torch < 2.1
            self.mem._record_memory_history(True, trace_alloc_max_entries=self.entries,
                                            trace_alloc_record_context=True)
            self.old_api = True
        self.on = True


    def close(self):
        if self.on:
            self.on = False
            try:
                self.mem._record_memory_history(None if not self.old_api else False)
            except Exception:
                pass

    def end(self, done):
        try:
            snap = self.mem._snapshot()
        finally:
            self.close()
        sites = {}
        total = 0
        for seg in snap.get("segments", ()):
            for blk in seg.get("blocks", ()):
                if blk.get("state") != "active_allocated":
                    continue
                frames = blk.get("frames") or []
                if not frames:
                    for h in blk.get("history") or ():  # torch < 2.1
                        frames = h.get("frames") or frames
                if not frames:
                    continue  # allocated before recording began: not the measured phase
                fr = trim([(f.get("filename"), f.get("line"), f.get("name")) for f in frames])
                size = int(blk.get("requested_size") or blk.get("size") or 0)
                total += size
                key = tuple(tuple(f) for f in fr)
                acc = sites.setdefault(key, [0, 0])
                acc[0] += size
                acc[1] += 1
        top = sorted(sites.items(), key=lambda kv: -kv[1][0])[:TOP]
        return {"source": "torch-memory-history", "total": total,
                "sites": [{"size": v[0], "count": v[1], "frames": [list(f) for f in k]}
                          for k, v in top]}


# ---------------------------------------------------------------- native: memray
# The interpreter's and libc's frames say nothing about the site: left out.
_INTERPRETER = ("Objects/", "Python/", "Include/", "Parser/", "Modules/", "libpython",
                "/python3", "libc.so", "libc-", "ld-linux", "libpthread", "malloc",
                "sysdeps/", "csu/")


def _interpreter_frame(fr):
    path = fr[0] or ""
    if path.endswith(".py"):
        return False
    return fr[2] == "_start" or any(s in path for s in _INTERPRETER)


NATIVE_RESOLVE = 200   # leaked records whose native stacks are resolved, largest first


class NativePart(Part):
    def __init__(self, ctx):
        import memray
        self.memray = memray
        self.dir = tempfile.mkdtemp(prefix="harness-memray-")
        self.path = os.path.join(self.dir, "capture.bin")
        self.tracker = memray.Tracker(self.path, native_traces=True)
        self.tracker.__enter__()
        self.on = True


    def close(self):
        if self.on:
            self.on = False
            self.tracker.__exit__(None, None, None)

    def _cleanup(self):
        for name in os.listdir(self.dir):
            try:
                os.unlink(os.path.join(self.dir, name))
            except OSError:
                pass
        try:
            os.rmdir(self.dir)
        except OSError:
            pass

    def end(self, done):
        try:
            self.close()
            reader = self.memray.FileReader(self.path)
            sites = {}
            records = list(reader.get_leaked_allocation_records(merge_threads=True))
            total = sum(rec.size for rec in records)
            # Resolving native stacks is slow: the largest records only, within a budget.
            records.sort(key=lambda rec: -rec.size)
            deadline = time.monotonic() + _env_number("HARNESS_NATIVE_S", 30.0)
            resolved = 0
            for rec in records[:NATIVE_RESOLVE]:
                if time.monotonic() > deadline:
                    break
                resolved += 1
                try:
                    stack = rec.hybrid_stack_trace()
                except Exception:
                    stack = rec.stack_trace()
                raw = [(fr[1], fr[2], fr[0]) for fr in stack]  # (func, file, line) -> ours
                if any(is_agent_file(f[0]) for f in raw) and not trim(
                        [f for f in raw if f[0].endswith(".py")]):
                    continue  # allocated by the agent's own Python code
                own = [f for f in raw if not _interpreter_frame(f)]
                fr = trim(own or raw[:1])
                key = tuple(tuple(f) for f in fr)
                acc = sites.setdefault(key, [0, 0])
                acc[0] += rec.size
                acc[1] += rec.n_allocations
            reader.close()
        finally:
            self._cleanup()
        top = sorted(sites.items(), key=lambda kv: -kv[1][0])[:TOP]
        return {"source": "memray", "total": total, "records": len(records),
                "resolved": resolved,
                "sites": [{"size": v[0], "count": v[1], "frames": [list(f) for f in k]}
                          for k, v in top]}


# Time: a stack sampler, TF1 per-op step stats, torch.profiler key averages.
# ---------------------------------------------------------------- stack
SWITCH_S = 0.0005   # the GIL's switch interval while the sampler runs
BUDGET_EVERY = 10   # TF1: every k-th Session.run traced in a budgeted run's windows


class StackPart(Part):
    def __init__(self, ctx):
        self.hz = _env_number("HARNESS_STACK_HZ", 200.0)
        self.windows = Windows(ctx.count, budget=ctx.budget, least=ctx.least)
        self.progress = ctx.progress
        self.ident = threading.current_thread().ident
        self.counts = {}
        self.samples = {"early": 0, "late": 0}
        self.busy = 0.0  # the sampler's own time
        self.stop_flag = False
        # A lower switch interval lets a sample land inside the step, not only at its
        # I/O points between steps.
        self.switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self.switch, SWITCH_S))
        self.thread = threading.Thread(target=self._loop, name="harness-stack-sampler")
        self.thread.daemon = True
        self.thread.start()

    def _loop(self):
        period = 1.0 / self.hz
        clock = time.perf_counter
        current = sys._current_frames
        which = self.windows.which
        counts = self.counts
        cache = {}  # co_filename -> is the agent's (or a skipped) file
        next_at = clock()
        while not self.stop_flag:
            # Always sleep: a late sample followed at once by another would count the
            # same point twice.
            next_at += period
            now = clock()
            if next_at < now + period / 2:
                next_at = now + period / 2
            time.sleep(next_at - now)
            t = clock()
            w = which(self.progress())
            if w is None:
                continue
            frame = current().get(self.ident)
            key = []
            while frame is not None:
                co = frame.f_code
                fn = co.co_filename
                kind = cache.get(fn)
                if kind is None:
                    kind = cache[fn] = frame_class(fn)
                if kind == 2:
                    # Not below step(state): the agent's own time, not counted.
                    if not (fn.endswith(STEP_CALLER) and frame.f_lineno in STEP_LINES):
                        key = []
                    break
                if kind == 0 and len(key) < KEEP_FRAMES:
                    key.append((fn, frame.f_lineno, getattr(co, "co_qualname", co.co_name)))
                frame = frame.f_back
            frame = None
            if key:
                key = tuple(key)
                acc = counts.get(key)
                if acc is None:
                    acc = counts[key] = {"early": 0, "late": 0}
                acc[w] += 1
                self.samples[w] += 1
            self.busy += clock() - t


    def close(self):
        if not self.stop_flag:
            sys.setswitchinterval(self.switch)
        self.stop_flag = True
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(2.0)

    def end(self, done):
        self.close()
        top = sorted(self.counts.items(), key=lambda kv: -(kv[1]["early"] + kv[1]["late"]))
        sites = [{"frames": [list(f) for f in k], "early": v["early"], "late": v["late"]}
                 for k, v in top[:TOP]]
        out = {"hz": self.hz,
               "windows": self.windows.describe({"early": {"samples": self.samples["early"]},
                                                 "late": {"samples": self.samples["late"]}}),
               "sites": sites, "overhead_s": round(self.busy, 6)}
        return out, self._short(done)

    def _short(self, done):
        return self.windows.short(done)


# ---------------------------------------------------------------- ops: TF1
class TF1Ops(Part):
    """Wrap BaseSession.run while measuring: every k-th call in a window is traced."""

    def __init__(self, ctx, session_module):
        self.sm = session_module
        cfg = sys.modules["tensorflow"]
        compat = getattr(getattr(cfg, "compat", None), "v1", None) or cfg
        self.RunOptions = compat.RunOptions
        self.RunMetadata = compat.RunMetadata
        self.windows = Windows(ctx.count, budget=ctx.budget, least=ctx.least)
        q = self.windows.early[1] - self.windows.early[0]
        # A budgeted run's windows are in time, its steps not known ahead.
        self.every = _env_number("HARNESS_OPS_EVERY", BUDGET_EVERY if ctx.budget
                                 else max(1, q // 50), int)
        self.progress = ctx.progress
        self.seen = {"early": 0, "late": 0}
        self.traced = {"early": 0, "late": 0}
        # (device, node) -> {"early": [us a traced call], "late": [...], "op": type}
        self.totals = {}
        self.optype = {}
        self.failure = None
        self.orig = session_module.BaseSession.run
        part = self

        def run(sess, fetches, *args, **kwargs):
            w = part.windows.which(part.progress())
            plain = (w is None or len(args) > 1 or "options" in kwargs
                     or "run_metadata" in kwargs or part.failure is not None)
            if not plain:
                part.seen[w] += 1
                plain = (part.seen[w] - 1) % part.every != 0
            if plain:
                return part.orig(sess, fetches, *args, **kwargs)
            opts = part.RunOptions(trace_level=part.RunOptions.FULL_TRACE)
            meta = part.RunMetadata()
            out = part.orig(sess, fetches, *args, options=opts, run_metadata=meta, **kwargs)
            try:
                part._add(w, sess, meta.step_stats)
                part.traced[w] += 1
            except Exception as exc:  # never break the scenario's run
                part.failure = _why(exc)
            return out

        session_module.BaseSession.run = run

    def _op_type(self, sess, node, label):
        if " = " in label:
            return label.split(" = ", 1)[1].split("(", 1)[0].strip()
        key = (id(sess.graph), node)
        if key not in self.optype:
            try:
                self.optype[key] = sess.graph.get_operation_by_name(node.split(":")[0]).type
            except Exception:
                self.optype[key] = "?"
        return self.optype[key]

    def _add(self, w, sess, step_stats):
        call = {}
        for dev in step_stats.dev_stats:
            device = dev.device
            tail = device.rsplit("/", 1)[-1]
            if (tail.startswith("stream:") and tail != "stream:all" or "memcpy" in tail
                    or "/host:" in device):
                continue  # per-stream copies of stream:all, TF 1.15's host-side duplicates
            short = device.split("device:", 1)[-1].lower()
            for ns in dev.node_stats:
                key = (short, ns.node_name)
                if key not in self.totals:
                    self.totals[key] = {"early": [], "late": [],
                                        "op": self._op_type(sess, ns.node_name,
                                                            ns.timeline_label)}
                call[key] = call.get(key, 0) + ns.all_end_rel_micros
        for key, us in call.items():
            self.totals[key][w].append(us)


    def close(self):
        if self.sm.BaseSession.run is not self.orig:
            self.sm.BaseSession.run = self.orig

    def end(self, done):
        self.close()
        if self.failure is not None:
            raise RuntimeError("reading step stats failed: " + self.failure)
        if not (self.traced["early"] or self.traced["late"]):
            raise RuntimeError("no Session.run call was traced while measuring "
                               "(the scenario ran no TF1 session in the windows)")
        # Per op, the median over the window's traced calls, robust to one preempted call.
        ops = []
        for (device, node), v in self.totals.items():
            ops.append({"name": node, "op": v["op"], "device": device,
                        "early_us": _median_of(v["early"], self.traced["early"]),
                        "late_us": _median_of(v["late"], self.traced["late"])})
        ops.sort(key=lambda o: -max(o["early_us"] or 0, o["late_us"] or 0))
        return {"source": "tf1-step-stats", "every": self.every,
                "windows": self.windows.describe(
                    {"early": {"calls": self.traced["early"]}, "late": {"calls": self.traced["late"]}}),
                "ops": ops[:TOP]}


def _median_of(values, calls):
    """The median of `values` padded with zeros to `calls` values; None for no call."""
    if not calls:
        return None
    v = sorted(values + [0] * (calls - len(values)))
    return round((v[(calls - 1) // 2] + v[calls // 2]) / 2, 3)


# ---------------------------------------------------------------- ops: torch
class TorchOps(Part):
    """torch.profiler over the first and last HARNESS_OPS_STEPS (default 50) steps."""

    def __init__(self, ctx):
        import torch
        self.torch = torch
        self.count = ctx.count
        self.span = _env_number("HARNESS_OPS_STEPS", 50, int)
        self.windows = Windows(ctx.count, self.span, ctx.budget, ctx.least)
        acts = [torch.profiler.ProfilerActivity.CPU]
        self.cuda = bool(torch.cuda.is_available())
        if self.cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        self.acts = acts
        self.prof = None
        self.current = None
        self.results = {}   # window -> (from step, to step, {op: [cpu_us, cuda_us, count]})
        self._start("early", 0)

    def _start(self, w, done):
        with warnings.catch_warnings():  # "clears events at the end of each cycle"
            warnings.simplefilter("ignore")
            self.prof = self.torch.profiler.profile(activities=self.acts)
            self.prof.__enter__()
        self.current = (w, done)

    def _stop(self, done):
        prof, (w, since) = self.prof, self.current
        self.prof = self.current = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prof.__exit__(None, None, None)
        table = {}
        for evt in prof.key_averages():
            dev = getattr(evt, "self_device_time_total", None)
            if dev is None:
                dev = getattr(evt, "self_cuda_time_total", 0)
            acc = table.setdefault(evt.key, [0.0, 0.0, 0])
            acc[0] += evt.self_cpu_time_total
            acc[1] += dev or 0
            acc[2] += evt.count
        self.results[w] = (since, done, table)

    def at_sample(self, done):
        if self.current is not None and self.current[0] == "early" and done >= self.windows.early[1]:
            self._stop(done)
        if self.current is not None and self.current[0] == "late" and \
                done - self.current[1] >= self.span:
            self._stop(done)     # a budgeted run's late window: its first `span` steps
        if self.current is None and "late" not in self.results and \
                self.windows.late_started(done) and done < self.count:
            self._start("late", done)

    def close(self):
        if self.prof is not None:
            prof, self.prof, self.current = self.prof, None, None
            try:
                prof.__exit__(None, None, None)
            except Exception:
                pass

    def end(self, done):
        if self.current is not None:
            self._stop(done)
        if not self.results:
            raise RuntimeError("the profiler window covered no step")
        names = set()
        for _, _, table in self.results.values():
            names.update(table)
        ops = []
        for name in names:
            row = {"name": name, "op": name}
            for w in ("early", "late"):
                since, to, table = self.results.get(w, (0, 0, {}))
                steps = to - since
                v = table.get(name)
                row[w + "_us"] = round(v[0] / steps, 3) if v and steps else (0.0 if steps else None)
                if self.cuda:
                    row[w + "_cuda_us"] = round(v[1] / steps, 3) if v and steps else None
            ops.append(row)

        def weight(o):
            return -max(o["early_us"] or 0, o["late_us"] or 0,
                        o.get("early_cuda_us") or 0, o.get("late_cuda_us") or 0)
        ops.sort(key=weight)
        win = {}
        for w in ("early", "late"):
            since, to, _ = self.results.get(w, (0, 0, None))
            win[w] = {"from": since, "to": to, "calls": to - since}
        return {"source": "torch-profiler", "windows": win, "ops": ops[:TOP]}


def make_ops(ctx):
    sm = (sys.modules.get("tensorflow.python.client.session")
          or sys.modules.get("tensorflow_core.python.client.session"))
    if "tensorflow" in sys.modules and sm is not None and hasattr(sm, "BaseSession"):
        return TF1Ops(ctx, sm)
    if "torch" in sys.modules:
        return TorchOps(ctx)
    raise RuntimeError("neither tensorflow (TF1 sessions) nor torch is imported by the scenario")


# ---------------------------------------------------------------- workers
# Heap attribution in the processes a step drives (pools, executors, data loaders).
# `Workers` arms children before the scenario loads: a fork runs `_forked`
# (register_at_fork, 3.7+), a new interpreter a `sitecustomize` first on PYTHONPATH.
# A child writes `a<pid>`, traces from the `start` marker (`s<pid>`), and at `end`
# writes its grown sites (`w<pid>.json`, or `e<pid>`); the agent adds them up.
ENV = "HARNESS_WORKER_TRACE"            # the run's folder, in the children's environment
AGENT_FILE = "HARNESS_WORKER_TRACE_FILE"  # this file, for a new interpreter's bootstrap
POLL_S = 0.02
WAIT_S = 20.0                           # the most the agent waits for its children's sites
START_WAIT_S = 2.0                      # ... and for them to start tracing

# A new interpreter's first import: loads this file by path, then any shadowed sitecustomize.
BOOTSTRAP = '''"""harness: heap attribution in a worker process (written by the agent)."""
def _harness_workers():
    import os, sys
    from importlib.util import module_from_spec, spec_from_file_location
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("%(file)s")
    if path and os.environ.get("%(env)s") == here:
        try:
            spec = spec_from_file_location("_harness_attribution", path)
            module = module_from_spec(spec)
            spec.loader.exec_module(module)
            module.in_child()
        except Exception:
            pass
    from importlib.machinery import PathFinder
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
_harness_workers()
del _harness_workers
''' % {"file": AGENT_FILE, "env": ENV}


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


# ---------------------------------------------------------------- in the agent
class Workers(object):
    """The agent's side: arms its children, marks the measured phase, collects."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="harness-workers-")
        _write(os.path.join(self.dir, "sitecustomize.py"), BOOTSTRAP)
        os.environ[ENV] = self.dir
        os.environ[AGENT_FILE] = os.path.abspath(__file__).replace(".pyc", ".py")
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = self.dir + (os.pathsep + path if path else "")
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forked)
        self.on = True

    def start(self, wait_s=START_WAIT_S):
        """Mark the phase's start; wait (`wait_s` at most) until each live armed child
        traces, so no task it runs is missed."""
        _write(os.path.join(self.dir, "start"), "")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            names = os.listdir(self.dir)
            armed = self._pids(names, "a")
            ready = self._pids(names, "s") | self._pids(names, "e")
            if not [p for p in armed - ready if self._alive(p)]:
                break
            time.sleep(0.002)

    @staticmethod
    def _pids(names, mark):
        return set(int(n[1:]) for n in names if n[:1] == mark and n[1:].isdigit())

    def _alive(self, pid):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            return state not in ("Z", "X")
        except (OSError, IndexError):
            return True

    def end(self, wait_s=WAIT_S):
        """The sites the armed children's heaps grew by (None where none was armed)."""
        _write(os.path.join(self.dir, "end"), "")
        began = time.monotonic()
        deadline = began + wait_s
        while True:
            names = os.listdir(self.dir)
            armed = self._pids(names, "a")
            answered = set(int(n[1:-5]) for n in names
                           if n[:1] == "w" and n.endswith(".json") and n[1:-5].isdigit())
            failed = self._pids(names, "e")
            waiting = [p for p in armed - answered - failed if self._alive(p)]
            if not waiting or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
        if not armed:
            if hasattr(os, "register_at_fork"):
                return None
            return {"unavailable": "Python %d.%d has no os.register_at_fork: its forked "
                                   "workers are not followed (spawned ones are)"
                                   % sys.version_info[:2]}
        sites = {}
        grew = 0
        for pid in sorted(answered):
            try:
                with open(os.path.join(self.dir, "w%d.json" % pid)) as f:
                    got = json.load(f)
            except (OSError, ValueError):
                continue
            grew += got.get("traced_end", 0) - got.get("traced_start", 0)
            for s in got.get("sites", ()):
                key = tuple(tuple(fr) for fr in s["frames"])
                acc = sites.setdefault(key, [0, 0])
                acc[0] += s["size"]
                acc[1] += s["count"]
        top = sorted(sites.items(), key=lambda kv: -kv[1][0])[:TOP]
        out = {"processes": len(answered), "armed": len(armed), "total": grew,
               "waited_s": round(time.monotonic() - began, 3),
               "sites": [{"size": v[0], "count": v[1], "frames": [list(f) for f in k]}
                         for k, v in top]}
        if waiting:
            out["unanswered"] = len(waiting)
        gone = armed - answered - failed - set(waiting)
        if gone:
            out["gone"] = len(gone)     # ended before the measured phase did
        why = []
        for pid in sorted(failed - answered):
            try:
                with open(os.path.join(self.dir, "e%d" % pid)) as f:
                    why.append(f.read()[:300])
            except OSError:
                pass
        if why:
            out["failed"] = why
        return out

    def close(self):
        if not self.on:
            return
        self.on = False
        if os.environ.get(ENV) == self.dir:
            os.environ.pop(ENV, None)
            os.environ.pop(AGENT_FILE, None)
            path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                    if p and p != self.dir]
            if path:
                os.environ["PYTHONPATH"] = os.pathsep.join(path)
            else:
                os.environ.pop("PYTHONPATH", None)
        try:
            for name in os.listdir(self.dir):
                os.unlink(os.path.join(self.dir, name))
            os.rmdir(self.dir)
        except OSError:
            pass


# ---------------------------------------------------------------- in a child
def _forked():
    folder = os.environ.get(ENV)
    if folder:
        try:
            _Child(folder)
        except Exception:
            pass


def in_child():
    """A new interpreter's start (the bootstrap): follow it and its forks."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forked)
    if not _helper():
        _forked()


# multiprocessing's helpers, which run no task (a fork server's forks are followed).
HELPERS = (b"multiprocessing.forkserver import main", b"multiprocessing.resource_tracker import",
           b"multiprocessing.semaphore_tracker import")


def _helper():
    """Whether this interpreter is one of multiprocessing's HELPERS."""
    try:
        with open("/proc/self/cmdline", "rb") as f:
            line = f.read()
    except OSError:
        return False
    return any(h in line for h in HELPERS)


class _Child(object):
    def __init__(self, folder):
        self.dir = folder
        if os.path.exists(os.path.join(folder, "end")):
            return                       # after the measured phase: nothing to say
        import tracemalloc
        self.tm = tracemalloc
        self.pid = os.getpid()
        self.start = None
        self.traced_start = 0
        _write(os.path.join(folder, "a%d" % self.pid), "")
        self._at_start()
        t = threading.Thread(target=self._poll, name="harness-workers")
        t.daemon = True
        t.start()

    def _at_start(self):
        """From the phase's start on, trace allocations afresh (a fork forgets its
        parent's traces), so the end snapshot holds only what the phase kept."""
        if self.start is None and os.path.exists(os.path.join(self.dir, "start")):
            if self.tm.is_tracing():
                self.tm.clear_traces()
            else:
                self.tm.start(FRAMES)
            self.traced_start = self.tm.get_traced_memory()[0]
            self.start = self.tm.take_snapshot()
            _write(os.path.join(self.dir, "s%d" % self.pid), "")

    def _poll(self):
        try:
            while not os.path.exists(os.path.join(self.dir, "end")):
                if os.getpid() != self.pid:
                    return               # a fork of this child: its own _Child polls
                self._at_start()
                time.sleep(POLL_S)
            if self.start is not None:
                _write(os.path.join(self.dir, "w%d.json" % self.pid),
                       json.dumps(self._grown()))
        except Exception as exc:
            try:
                _write(os.path.join(self.dir, "e%d" % self.pid), "%s: %s" % (
                    type(exc).__name__, exc))
            except Exception:
                pass
        finally:
            if self.start is not None:
                try:
                    self.tm.stop()
                except Exception:
                    pass

    def _grown(self):
        t = time.monotonic()
        end = self.tm.take_snapshot()
        traced_end = self.tm.get_traced_memory()[0]
        self.tm.stop()          # what follows is not the task's, and runs faster untraced
        stats = end.compare_to(self.start, "traceback")
        sites = grown_sites(stats, _trim, _FuncNames())
        return {"pid": self.pid, "traced_start": self.traced_start,
                "traced_end": traced_end, "took_s": round(time.monotonic() - t, 3),
                "sites": sites}


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIP = ("threading.py", "tracemalloc.py")
# The pools' loops, which call the task: a worker's site ends there.
_POOLS = tuple(os.sep + p + os.sep for p in ("multiprocessing", os.path.join(
    "concurrent", "futures")))


def _trim(frames):
    """Innermost-first (file, line) frames of a worker's allocation -> the task's part,
    above the pool's loop or the agent; empty for this file's own snapshots."""
    out = []
    for path, line in frames:
        full = os.path.abspath(path) if path else ""
        if full == os.path.abspath(__file__):
            return []                    # this file's own snapshot
        if full.startswith(_HERE) or (full and os.path.basename(full) == "sitecustomize.py"
                                      and os.path.dirname(full) == os.environ.get(ENV)):
            break
        if out and any(p in full for p in _POOLS):
            break
        if os.path.basename(full) in _SKIP:
            continue
        if len(out) < KEEP_FRAMES:
            out.append((path, line))
    return out


def parse_kinds(text):
    """'heap,stack' or 'all' -> list of kind names; ValueError naming the bad one."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if names == ["all"]:
        return list(KINDS)
    bad = [n for n in names if n not in KINDS]
    if bad or not names:
        raise ValueError("unknown --attribute kind %r: choose from %s or 'all'"
                         % (",".join(bad) or text, ",".join(KINDS)))
    return [k for k in KINDS if k in names]


def make(kinds, scenario_path):
    return Attribution(kinds, scenario_path)


# ---------------------------------------------------------------- the whole
class _Ctx(object):
    def __init__(self, count, progress, scenario, budget=0.0, least=0):
        self.count = count
        self.progress = progress
        self.scenario = scenario
        self.budget = budget    # the measured phase's --budget in seconds (0: none)
        self.least = least      # ... and its --budget-min steps


_PARTS = {"heap": HeapPart, "stack": StackPart, "ops": make_ops, "device": DevicePart,
          "native": NativePart}


class Attribution(object):
    def __init__(self, kinds, scenario_path):
        self.kinds = [k for k in KINDS if k in kinds]
        self.scenario = scenario_path
        self.parts = {}
        self.record = {"type": "where", "kinds": list(self.kinds), "calls": 0,
                       "frames": FRAMES}
        self.errors = {}
        self.workers = None
        if "heap" in self.kinds:
            try:
                self.workers = Workers()    # before the scenario starts any process
            except Exception as exc:
                self.errors["workers"] = _why(exc)
        for k in kinds:
            if k not in KINDS:
                self.errors[k] = "unknown kind (choose from %s)" % ",".join(KINDS)

    def measure_start(self, count, progress, budget=0.0, least=0):
        ctx = _Ctx(count, progress, self.scenario, budget, least)
        # Heap last: tracemalloc then sees none of the others' set-up.
        for kind in sorted(KINDS, key=lambda k: k == "heap"):
            if kind not in self.kinds:
                continue
            try:
                self.parts[kind] = _PARTS[kind](ctx)
            except ImportError as exc:
                if kind == "native":
                    self.record["native"] = {"unavailable": UNAVAILABLE}
                else:
                    self.errors[kind] = _why(exc)
            except Exception as exc:
                self.errors[kind] = _why(exc)
        if self.workers is not None and "heap" in self.parts:
            self.workers.start()

    def at_sample(self, done):
        for kind, part in list(self.parts.items()):
            try:
                part.at_sample(done)
            except Exception as exc:
                self.errors[kind] = _why(exc)
                self._drop(kind)

    def _drop(self, kind):
        part = self.parts.pop(kind, None)
        if part is not None:
            try:
                part.close()
            except Exception:
                pass

    def close(self):
        """Stop every part without a record (the run failed): idempotent."""
        for kind in list(self.parts):
            self._drop(kind)
        if self.workers is not None:
            self.workers.close()

    def measure_end(self, done):
        self.record["calls"] = done
        # Heap first: its end snapshot should not see the other parts' read-outs.
        for kind in sorted(KINDS, key=lambda k: k != "heap"):
            part = self.parts.pop(kind, None)
            if part is None:
                continue
            try:
                out = part.end(done)
                if isinstance(out, tuple):
                    out, note = out
                    if note:
                        self.errors[kind] = note
                self.record[kind] = out
                if kind == "heap" and self.workers is not None:
                    got = self.workers.end()
                    if got is not None:
                        self.record["workers"] = got
            except Exception as exc:
                self.errors[kind] = _why(exc)
                try:
                    part.close()
                except Exception:
                    pass
        if self.workers is not None:
            self.workers.close()
        if self.errors:
            self.record["errors"] = dict(self.errors)
        return self.record

