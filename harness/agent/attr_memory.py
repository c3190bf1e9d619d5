"""Attribution of memory (attribution.py's parts): heap (tracemalloc), device (PyTorch's
CUDA allocator history), native (memray). Stdlib only, Python 3.6+; a framework is
imported only when the scenario already has."""

import os
import sys
import tempfile
import time

from attr_frames import (Part, FRAMES, TOP, _env_number, _FuncNames, grown_sites,
                         is_agent_file, trim)

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
            # Resolving a native stack is slow (symbols of libraries as large as
            # libtorch_cuda take seconds each): the largest records only, within a budget.
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


