"""What the attribution parts share (attribution.py's modules; stdlib only, Python 3.6+):
the kinds, frame trimming (the agent's own frames cut off), function names for
tracemalloc's frames, the early and late windows."""

import dis
import os
import sys
import time


def _protocol_kinds():
    """The protocol's list of attribution kinds (fields.WHERE_KINDS, which the host and
    agent.py read too), from the fields.py beside this file: loaded by its path, not
    imported by name, since a scenario may have a module `fields` of its own."""
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
    """The lines of stepper.py that call the scenario's step(state): a stack or an
    allocation is the scenario's only when the agent's frame above it is one of them
    (not the agent's own stop-file check or sampler, also in stepper.py)."""
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


# The attribution modules themselves (the TF1 wrapper sits between the scenario and
# the session): left out of stacks, not cut at.
_OWN = ("attribution", "attr_frames", "attr_memory", "attr_time", "attr_workers")


def frame_class(path):
    """0: keep; 1: leave out (threading, tracemalloc, the attribution modules: the TF1 wrapper sits
    between the scenario and the session); 2: the agent, which calls the step: stop."""
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
    """Innermost-first [file, line, func] frames -> the part below the agent.

    Cut at the first frame of the agent (its step call and what runs it), leave out
    threading, tracemalloc and the attribution modules' frames, keep KEEP_FRAMES. Empty:
    the agent's own allocation or stack (its first agent frame is not the step call).
    """
    out = []
    for fr in frames:
        c = frame_class(fr[0])
        if c == 2:
            # Below the stepper's call of step(): the scenario's. Below any other agent
            # frame (its sampler, its JSON writer): the agent's own, not the scenario's.
            return out if (os.path.basename(fr[0]) == STEP_CALLER
                           and fr[1] in STEP_LINES) else []
        if c == 0 and len(out) < KEEP_FRAMES:
            out.append([fr[0], fr[1], fr[2]])
    return out


def grown_sites(stats, cut, names):
    """tracemalloc's `compare_to(..., "traceback")` statistics -> the TOP sites that grew,
    largest first, as [{"size", "count", "frames": [[file, line, function], ...]}]:
    each statistic's frames innermost first, cut by `cut` ((file, line) pairs -> the
    frames kept, each starting with file and line; empty: not the scenario's), and
    statistics whose kept frames are the same added up. `names`: a `_FuncNames`."""
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
    """The code's qualified name. Before 3.11 code has none: a comprehension's or
    lambda's is made as 3.11 makes it (`step.<locals>.<genexpr>`, from `outer`, the
    name of the code it is in), so the host names it by the function it is written in
    (analysis.where.function); a tracemalloc frame of `step` on that line is named so too."""
    name = getattr(co, "co_qualname", None)
    if name is not None:
        return name
    if outer and co.co_name in INNER:
        return outer + ".<locals>." + co.co_name
    return co.co_name


# ---------------------------------------------------------------- windows
class Windows(object):
    """Early: steps [0, q); late: [count - q, count); q = a quarter of the planned steps.

    A run with a time budget (`budget` seconds; its count only a cap, seldom reached;
    at least `least` steps) has each window the later of two: in time, the budget's
    first quarter and from its last quarter on; in steps, the first and the last
    quarter of its least steps (a slow step's run goes on past its budget to them).
    `span` then bounds the early window's steps alone. Each says the steps it saw
    (`describe`)."""

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
    """What every attribution part answers: at_sample (nothing, unless it works in
    windows), close (stop without a record), end (its part of the where record)."""

    on = False

    def at_sample(self, done):
        pass
