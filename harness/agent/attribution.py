"""Attribution for one measured phase: where the memory went and where the time went.

Imported by the agent only when it runs with --attribute KINDS. Stdlib only, Python 3.6+.
One object follows the measured phase (`make`), and its `measure_end` returns the
"where" record (one JSON line, written by the agent just before "end"):

    heap    tracemalloc from the first measured step to the last: the live blocks
            allocated in between, grouped by traceback (the agent's own frames cut off),
            top 50 by size. Started at measure_start, so its start snapshot is empty and
            the growth covers exactly the measured steps ("calls").
    stack   a daemon thread reads the stepping thread's frame HARNESS_STACK_HZ times a
            second (default 200) and counts stacks in the early window (first quarter of
            the planned steps) and the late window (last quarter).
    ops     TensorFlow 1 sessions: every k-th Session.run in each window runs with
            FULL_TRACE and its step stats are summed per node; PyTorch: torch.profiler
            over the first and the last HARNESS_OPS_STEPS steps (at sample boundaries).
    device  PyTorch's CUDA allocator history: blocks still allocated at the end that were
            allocated while recording (the measured phase), grouped by Python stack.
    native  memray (native traces) around the measured phase: allocations not freed by
            the end, with their native and Python stacks.

No part raises: what cannot be taken is said in the record's "errors".
"""

import dis
import os
import sys
import tempfile
import threading
import time
import warnings

KINDS = ("heap", "stack", "ops", "device", "native")
FRAMES = 25          # traceback depth: enough to reach the scenario's line
KEEP_FRAMES = 12     # frames kept per site, innermost first
TOP = 50
UNAVAILABLE = "memray is not importable in this image"

_AGENT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIP_BASENAMES = ("threading.py", "tracemalloc.py")


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


def _env_number(name, default, kind=float):
    try:
        value = kind(os.environ.get(name, default))
        return value if value > 0 else default
    except ValueError:
        return default


def _why(exc):
    return ("%s: %s" % (type(exc).__name__, exc))[:300]


_THIS = os.path.splitext(os.path.abspath(__file__))[0]


def frame_class(path):
    """0: keep; 1: leave out (threading, tracemalloc, this module: the TF1 wrapper sits
    between the scenario and the session); 2: the agent, which calls the step: stop."""
    if not path:
        return 0
    full = os.path.abspath(path)
    if os.path.splitext(full)[0] == _THIS or os.path.basename(full) in _SKIP_BASENAMES:
        return 1
    return 2 if full.startswith(_AGENT_DIR) else 0


def is_agent_file(path):
    return frame_class(path) != 0


def trim(frames):
    """Innermost-first [file, line, func] frames -> the part below the agent.

    Cut at the first frame of the agent (its step call and what runs it), leave out
    threading, tracemalloc and this module's frames, keep KEEP_FRAMES. Empty: the agent's
    own allocation or stack.
    """
    out = []
    for fr in frames:
        c = frame_class(fr[0])
        if c == 2:
            break
        if c == 0 and len(out) < KEEP_FRAMES:
            out.append([fr[0], fr[1], fr[2]])
    return out


class _FuncNames(object):
    """(file, line) -> function name, for tracemalloc frames (which carry no name):
    compile the file once and map each line to the innermost code object holding it."""

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
        todo = [code]
        while todo:
            co = todo.pop()
            name = getattr(co, "co_qualname", co.co_name)
            for _, line in dis.findlinestarts(co):
                if line is not None:
                    table[line] = name  # nested code comes later and overrides
            todo.extend(c for c in co.co_consts if hasattr(c, "co_code"))
        return table


# ---------------------------------------------------------------- heap
class HeapPart(object):
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

    def at_sample(self, done):
        pass

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
        # 3.7+: a Traceback iterates oldest first; 3.6: most recent first.
        newest_last = sys.version_info >= (3, 7)
        names = _FuncNames()
        sites = {}
        for st in stats:
            if st.size_diff <= 0:
                continue
            raw = list(st.traceback)
            if newest_last:
                raw.reverse()
            frames = trim([(f.filename, f.lineno, None) for f in raw])
            if not frames:
                continue
            key = tuple((f[0], f[1]) for f in frames)
            acc = sites.get(key)
            if acc is None:
                sites[key] = [st.size_diff, st.count_diff]
            else:
                acc[0] += st.size_diff
                acc[1] += st.count_diff
        top = sorted(sites.items(), key=lambda kv: -kv[1][0])[:TOP]
        out = [{"size": v[0], "count": v[1],
                "frames": [[f, ln, names.name(f, ln)] for f, ln in k]} for k, v in top]
        self.overhead += time.perf_counter() - t
        return {"traced_start": self.traced_start, "traced_end": traced_end, "peak": peak,
                "frames": self.frames, "sites": out, "overhead_s": round(self.overhead, 6)}

    def close(self):
        if self.owned and self.tm.is_tracing():
            self.tm.stop()


# ---------------------------------------------------------------- windows
class Windows(object):
    """Early: steps [0, q); late: [count - q, count); q = a quarter of the planned steps."""

    def __init__(self, count, span=None):
        q = max(1, count // 4)
        if span is not None:
            q = max(1, min(q, span))
        self.count = count
        self.early = (0, min(q, count))
        self.late = (max(0, count - q), count)

    def which(self, i):
        if self.early[0] <= i < self.early[1]:
            return "early"
        if self.late[0] <= i < self.late[1]:
            return "late"
        return None

    def describe(self, extra):
        return {"early": dict({"from": self.early[0], "to": self.early[1]}, **extra["early"]),
                "late": dict({"from": self.late[0], "to": self.late[1]}, **extra["late"])}


# ---------------------------------------------------------------- stack
class StackPart(object):
    def __init__(self, ctx):
        self.hz = _env_number("HARNESS_STACK_HZ", 200.0)
        self.windows = Windows(ctx.count)
        self.progress = ctx.progress
        self.ident = threading.current_thread().ident
        self.counts = {}
        self.samples = {"early": 0, "late": 0}
        self.busy = 0.0  # the sampler's own time
        self.stop_flag = False
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
            # Always sleep: a sample taken late (the GIL is handed over at the switch
            # interval, 5 ms by default) must not be followed at once by another at the
            # same point of the step, which would count it twice.
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
            while frame is not None and len(key) < KEEP_FRAMES:
                co = frame.f_code
                fn = co.co_filename
                kind = cache.get(fn)
                if kind is None:
                    kind = cache[fn] = frame_class(fn)
                if kind == 2:
                    break
                if kind == 0:
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

    def at_sample(self, done):
        pass

    def close(self):
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
        if done < self.windows.late[1]:
            return "the run stopped at step %d, before the end of the late window (%d..%d)" % (
                done, self.windows.late[0], self.windows.late[1])
        return None


# ---------------------------------------------------------------- ops: TF1
class TF1Ops(object):
    """Wrap BaseSession.run while measuring: every k-th call in a window is traced."""

    def __init__(self, ctx, session_module):
        self.sm = session_module
        cfg = sys.modules["tensorflow"]
        compat = getattr(getattr(cfg, "compat", None), "v1", None) or cfg
        self.RunOptions = compat.RunOptions
        self.RunMetadata = compat.RunMetadata
        self.windows = Windows(ctx.count)
        q = self.windows.early[1] - self.windows.early[0]
        self.every = _env_number("HARNESS_OPS_EVERY", max(1, q // 50), int)
        self.progress = ctx.progress
        self.seen = {"early": 0, "late": 0}
        self.traced = {"early": 0, "late": 0}
        self.totals = {}  # (device, node) -> {"early": us, "late": us, "op": type}
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
        for dev in step_stats.dev_stats:
            device = dev.device
            tail = device.rsplit("/", 1)[-1]
            if (tail.startswith("stream:") and tail != "stream:all" or "memcpy" in tail
                    or "/host:" in device):
                continue  # per-stream copies of stream:all, TF 1.15's host-side duplicates
            short = device.split("device:", 1)[-1].lower()
            for ns in dev.node_stats:
                key = (short, ns.node_name)
                acc = self.totals.get(key)
                if acc is None:
                    acc = self.totals[key] = {"early": 0, "late": 0,
                                              "op": self._op_type(sess, ns.node_name,
                                                                  ns.timeline_label)}
                acc[w] += ns.all_end_rel_micros

    def at_sample(self, done):
        pass

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
        ops = []
        for (device, node), v in self.totals.items():
            e = self.traced["early"]
            la = self.traced["late"]
            ops.append({"name": node, "op": v["op"], "device": device,
                        "early_us": round(v["early"] / e, 3) if e else None,
                        "late_us": round(v["late"] / la, 3) if la else None})
        ops.sort(key=lambda o: -max(o["early_us"] or 0, o["late_us"] or 0))
        return {"source": "tf1-step-stats", "every": self.every,
                "windows": self.windows.describe(
                    {"early": {"calls": self.traced["early"]}, "late": {"calls": self.traced["late"]}}),
                "ops": ops[:TOP]}


# ---------------------------------------------------------------- ops: torch
class TorchOps(object):
    """torch.profiler over the first and the last HARNESS_OPS_STEPS (default 50) steps,
    started and stopped at sample points."""

    def __init__(self, ctx):
        import torch
        self.torch = torch
        self.count = ctx.count
        self.span = _env_number("HARNESS_OPS_STEPS", 50, int)
        self.windows = Windows(ctx.count, self.span)
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
        if self.current is None and "late" not in self.results and done >= self.windows.late[0] \
                and done < self.count:
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


# ---------------------------------------------------------------- device: torch CUDA
class DevicePart(object):
    def __init__(self, ctx):
        torch = sys.modules.get("torch")
        if torch is None:
            if "jax" in sys.modules:
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

    def at_sample(self, done):
        pass

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
# The interpreter's and libc's own frames say nothing about the site: left out of native
# stacks (file names as the debug info or the library path give them).
_INTERPRETER = ("Objects/", "Python/", "Include/", "Parser/", "Modules/", "libpython",
                "/python3", "libc.so", "libc-", "ld-linux", "libpthread", "malloc",
                "sysdeps/", "csu/")


def _interpreter_frame(fr):
    path = fr[0] or ""
    if path.endswith(".py"):
        return False
    return fr[2] == "_start" or any(s in path for s in _INTERPRETER)


class NativePart(object):
    def __init__(self, ctx):
        import memray
        self.memray = memray
        self.dir = tempfile.mkdtemp(prefix="harness-memray-")
        self.path = os.path.join(self.dir, "capture.bin")
        self.tracker = memray.Tracker(self.path, native_traces=True)
        self.tracker.__enter__()
        self.on = True

    def at_sample(self, done):
        pass

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
            total = 0
            for rec in reader.get_leaked_allocation_records(merge_threads=True):
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
                total += rec.size
                key = tuple(tuple(f) for f in fr)
                acc = sites.setdefault(key, [0, 0])
                acc[0] += rec.size
                acc[1] += rec.n_allocations
            reader.close()
        finally:
            self._cleanup()
        top = sorted(sites.items(), key=lambda kv: -kv[1][0])[:TOP]
        return {"source": "memray", "total": total,
                "sites": [{"size": v[0], "count": v[1], "frames": [list(f) for f in k]}
                          for k, v in top]}


# ---------------------------------------------------------------- the whole
class _Ctx(object):
    def __init__(self, count, progress, scenario):
        self.count = count
        self.progress = progress
        self.scenario = scenario


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
        for k in kinds:
            if k not in KINDS:
                self.errors[k] = "unknown kind (choose from %s)" % ",".join(KINDS)

    def measure_start(self, count, progress):
        ctx = _Ctx(count, progress, self.scenario)
        # Stack first, heap last: tracemalloc then sees none of the others' set-up.
        for kind in ("stack", "ops", "device", "native", "heap"):
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

    def measure_end(self, done):
        self.record["calls"] = done
        # Heap first: its end snapshot should not see the other parts' read-outs.
        for kind in ("heap", "stack", "ops", "device", "native"):
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
            except Exception as exc:
                self.errors[kind] = _why(exc)
                try:
                    part.close()
                except Exception:
                    pass
        if self.errors:
            self.record["errors"] = dict(self.errors)
        return self.record
