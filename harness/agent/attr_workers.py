"""Heap attribution in the worker processes a step drives (attribution.py's part of
`heap`): a pool's workers, a ProcessPoolExecutor's, a data loader's, forked or spawned.

The agent arms its children before the scenario is imported (`Workers`): a fork runs
`_forked` (os.register_at_fork), a new interpreter runs a `sitecustomize` written into
the run's folder and put first on PYTHONPATH, which loads this file by its path. Either
says so (a file `a<pid>`) and polls for the agent's markers: from `start` (the measured
phase's first step, which waits until each child says it traces, `s<pid>`; at once where
it began already) the child traces its allocations with tracemalloc, at `end` it writes
the sites of those still held (`w<pid>.json`; `e<pid>` if it could not), as the heap
part does for the stepping process. The agent waits
for every armed child still alive, and adds their sites up.

Stdlib only, Python 3.6+ (a fork is followed from 3.7, which has register_at_fork).
"""

import json
import os
import sys
import tempfile
import threading
import time

ENV = "HARNESS_WORKER_TRACE"            # the run's folder, in the children's environment
AGENT_FILE = "HARNESS_WORKER_TRACE_FILE"  # this file, for a new interpreter's bootstrap
POLL_S = 0.02
WAIT_S = 20.0                           # the most the agent waits for its children's sites
START_WAIT_S = 2.0                      # ... and for them to start tracing
FRAMES = 25
KEEP_FRAMES = 12
TOP = 50

# A new interpreter's first import: loads this file by its path (as hooks.py loads the
# attribution modules, never by a name a scenario may have), then the sitecustomize this
# one stands before, if any.
BOOTSTRAP = '''"""harness: heap attribution in a worker process (written by the agent)."""
def _harness_workers():
    import os, sys
    from importlib.util import module_from_spec, spec_from_file_location
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("%(file)s")
    if path and os.environ.get("%(env)s") == here:
        try:
            spec = spec_from_file_location("_harness_attr_workers", path)
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
        """Mark the measured phase's start, and wait (`wait_s` at most) until every
        armed child still alive traces from it: a task it ran before it looked would be
        missed, and the calls it is divided by would not be."""
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
    """A new interpreter's start (the bootstrap sitecustomize): it is followed, and so
    are its own forks (a forkserver's workers)."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forked)
    if not _helper():
        _forked()


# multiprocessing's own helpers, which run no task: the fork server (its forks, the
# workers, are followed by the at-fork hook) and the resource tracker.
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
        """From the measured phase's start on (or this process's, the later), the blocks
        allocated are traced: the start snapshot is empty, and the end one holds only
        what the phase allocated and kept (a fork of a traced process forgets what it
        was traced with, as a new interpreter has nothing traced)."""
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
        frames = _frames()
        sites = frames.grown_sites(stats, _trim, frames._FuncNames())
        return {"pid": self.pid, "traced_start": self.traced_start,
                "traced_end": traced_end, "took_s": round(time.monotonic() - t, 3),
                "sites": sites}


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIP = ("threading.py", "tracemalloc.py")
# The pools' own loops, which call the task: a site's frames end at the task, as the
# stepping process's end at the step (the agent's frames a fork still holds lie below).
_POOLS = tuple(os.sep + p + os.sep for p in ("multiprocessing", os.path.join(
    "concurrent", "futures")))


def _trim(frames):
    """Innermost-first (file, line) frames of a worker's allocation -> the task's: those
    above the pool's loop (or above the agent, or this file's own snapshots: none),
    KEEP_FRAMES of them; a site of the pool's own machinery keeps its frames."""
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


def _frames():
    """attr_frames (function names, the sites that grew), loaded beside this file by its
    path where the agent's modules are not importable (a spawned worker)."""
    mod = sys.modules.get("attr_frames")
    if mod is None:
        from importlib.util import module_from_spec, spec_from_file_location
        spec = spec_from_file_location("_harness_attr_frames",
                                       os.path.join(_HERE, "attr_frames.py"))
        mod = module_from_spec(spec)
        spec.loader.exec_module(mod)
    return mod
