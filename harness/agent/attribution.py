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
            the planned steps) and the late window (last quarter); in a run with a time
            budget, those of its least steps or of its budget in time, the later.
    ops     TensorFlow 1 sessions: every k-th Session.run in each window runs with
            FULL_TRACE and its step stats are summed per node; PyTorch: torch.profiler
            over the first and the last HARNESS_OPS_STEPS steps (at sample boundaries).
    device  PyTorch's CUDA allocator history: blocks still allocated at the end that were
            allocated while recording (the measured phase), grouped by Python stack.
    native  memray (native traces) around the measured phase: allocations not freed by
            the end, with their native and Python stacks.
    workers with heap: the same in the processes the step drives (attr_workers.py:
            tracemalloc in each forked or spawned child, its sites added up).

No part raises: what cannot be taken is said in the record's "errors".
"""

from attr_frames import FRAMES, KINDS, UNAVAILABLE, _why
from attr_memory import DevicePart, HeapPart, NativePart
from attr_time import StackPart, make_ops
from attr_workers import Workers


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

