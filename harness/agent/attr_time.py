"""Attribution of time (attribution.py's parts): a stack sampler (a thread reading the
stepping thread's frame), TensorFlow 1 per-op step stats, torch.profiler key averages.
Stdlib only, Python 3.6+."""

import sys
import threading
import time
import warnings

from attr_frames import (Part, KEEP_FRAMES, STEP_CALLER, STEP_LINES, TOP, Windows, _env_number,
                         _why, frame_class)

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
        # A thread waiting for the GIL gets it where the stepping thread drops it: at an
        # I/O call (the agent's stop-file check) long before the switch interval (5 ms)
        # forces it, so at 5 ms every sample of a pure-Python step landed between steps.
        # At 0.5 ms a sample lands where the step spends its time.
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
            while frame is not None:
                co = frame.f_code
                fn = co.co_filename
                kind = cache.get(fn)
                if kind is None:
                    kind = cache[fn] = frame_class(fn)
                if kind == 2:
                    # Below the stepper's step(state): the scenario's. Below any other
                    # agent frame (its stop-file check, its sample writer): the agent's
                    # own time between steps, not counted (as attr_frames.trim).
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
        # An op's time in a window is its median over the window's traced calls (0 in a
        # call it did not run in), not their mean: on a busy host one call preempted
        # inside a cheap op outweighed the op whose time grew on every call.
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
    """torch.profiler over the first and the last HARNESS_OPS_STEPS (default 50) steps,
    started and stopped at sample points."""

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


