"""harness fork server: one warm interpreter forking a fresh agent run per request, as a new
interpreter per short cell (`harness.check`, the plugin) costs more than its budget.

Stdin: JSON lines {"argv", "env", "per_run", "cwd", "log", "cgroup", "preload"} (null
argv: preload, reply {"ready": true}). Stdout: {"pid"}, {"exit"}; {"refused": why} ends
it (a preload's thread, "stale" modules). If the host goes, the run's group is killed.
Stdlib, Python 3.6+."""
import gc
import importlib.util
import json
import os
import select
import signal
import sys
import threading
import traceback

import agent

# A scenario's own `import agent` finds its own module, as in a fresh run.
sys.modules.pop("agent", None)
PRELOAD_NAME = "_harness_preload"
WAKEUP = []     # the server's SIGCHLD pipe (read end, write end): no run keeps it
# In a server made by `fork_here`: the host's allocator settings at its start.
HERE = []
# The environment this interpreter started with: what the harness asked, and what a
# wrapper it was named by (`#!/bin/sh ... X=1 exec python "$@"`) set on the way.
STARTED_ENV = dict(os.environ)

# The allocator settings a run forked from its host's process takes as its own.
ALLOCATOR_ENV = ("PYTHONMALLOC", "GLIBC_TUNABLES")


def malloc_objects():
    """Have Python's objects allocated by malloc from now on, as PYTHONMALLOC=malloc would
    (a fork of a pymalloc process: mallinfo cannot see its arenas). Returns whether
    objects are malloc's now (False for another allocator, or before 3.8)."""
    try:
        import ctypes   # lazy: only in a fork of the host
        api = ctypes.pythonapi
        name = api._PyMem_GetCurrentAllocatorName
    except (ImportError, AttributeError):
        return False
    name.restype = ctypes.c_char_p
    now = name()
    if now != b"pymalloc":
        return now == b"malloc"

    class Allocator(ctypes.Structure):
        _fields_ = [(n, ctypes.c_void_p) for n in ("ctx", "malloc", "calloc", "realloc",
                                                    "free")]

    get, put = api.PyMem_GetAllocator, api.PyMem_SetAllocator
    get.argtypes = put.argtypes = [ctypes.c_int, ctypes.POINTER(Allocator)]
    get.restype = put.restype = None
    raw = Allocator()
    get(0, ctypes.byref(raw))           # PYMEM_DOMAIN_RAW
    for domain in (1, 2):               # PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ
        was = Allocator()
        get(domain, ctypes.byref(was))
        put(domain, ctypes.byref(Allocator(None, raw.malloc, raw.calloc, was.realloc,
                                           was.free)))
    return True


def as_forked(started):
    """Set up a run forked from the host's process: its own streams, the fork's objects
    frozen, malloc objects if asked, and the host's start allocator settings (`started`)."""
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    if hasattr(gc, "freeze"):
        gc.freeze()
    if os.environ.get("PYTHONMALLOC") == "malloc" and malloc_objects():
        started = dict(started, PYTHONMALLOC="malloc")
    for name in ALLOCATOR_ENV:
        if started.get(name) is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = started[name]


def threads():
    """This process's Python threads."""
    return threading.active_count()


def os_threads():
    """This process's OS threads (native ones included); None where it cannot be told."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


BLAS_GETTERS = ("openblas_get_num_threads", "openblas_get_num_threads64_",
                "scipy_openblas_get_num_threads", "scipy_openblas_get_num_threads64_")


def fork_safe_threads():
    """Native threads of pools known to re-make themselves in a fork (pthread_atfork):
    OpenBLAS's, n - 1 per loaded copy."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return 0
    import ctypes   # lazy: only where an OpenBLAS is loaded
    count = 0
    for lib in sorted(libs):
        try:
            handle = ctypes.CDLL(lib)
        except OSError:
            continue
        for name in BLAS_GETTERS:
            getter = getattr(handle, name, None)
            if getter is not None:
                count += max(int(getter()) - 1, 0)
                break
    return count


def unsafe_threads(before, after, python_new, safe):
    """Native threads an import started beyond `safe` fork-safe ones (OS counts `before`,
    `after`; `python_new` Python ones): a fork lacks them, and a run waiting on one hangs."""
    if before is None or after is None:
        return 0
    return max(after - before - python_new - safe, 0)


def warm_up():
    """Do once here what every run does alike: import the agent's modules and read the
    platform name (before 3.9 it runs `uname -p`)."""
    import ast  # noqa: F401
    import resource  # noqa: F401
    import runpy  # noqa: F401
    agent.platform_name()
    agent.parse_args(["--scenario", os.devnull])


def stamp(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def changed(loaded):
    """The file of a preloaded module that changed since it was imported, or None."""
    for path, seen in loaded.items():
        if stamp(path) != seen:
            return path
    return None


def preload(path, loaded):
    """Import the scenario file here once, so its modules are loaded before the fork;
    new modules' files go to `loaded`. Returns why this process can no longer fork, or None."""
    before = threads()
    os_before, safe_before = os_threads(), fork_safe_threads()
    saved = list(sys.path)
    modules = set(sys.modules)
    try:
        spec = importlib.util.spec_from_file_location(PRELOAD_NAME, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException:   # noqa: B036  (a test module's sys.exit, a failed import)
        pass
    finally:
        sys.path[:] = saved
        sys.modules.pop(PRELOAD_NAME, None)
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None)
        if isinstance(file, str):
            loaded[file] = stamp(file)
    if threads() > before:
        return "importing %s's modules started a thread" % path
    native = unsafe_threads(os_before, os_threads(), threads() - before,
                            fork_safe_threads() - safe_before)
    if native:
        return "importing %s's modules started %d native thread(s)" % (path, native)
    if hasattr(gc, "freeze"):
        # Freeze what the imports left (3.7+), so a run's collections walk only what
        # it made and touch no shared page.
        gc.collect()
        gc.freeze()
    return None


def wrapped(asked, per_run):
    """The environment `asked` as a fresh interpreter started through this one's wrapper
    would have it: with what the start set, changed or unset. A server is started with
    its runs' environment (the host keys servers by it) but for the `per_run` variables,
    so any other difference is the wrapper's."""
    env = dict((k, v) for k, v in asked.items() if k in per_run or k in STARTED_ENV)
    env.update((k, v) for k, v in STARTED_ENV.items() if k not in per_run)
    return env


def child(request, replies):
    """The forked run: its own session, cgroup, output, cwd and environment, then the
    agent; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in WAKEUP:
            os.close(fd)
        os.setsid()
        os.close(replies)   # the host sees the server's end alone
        if request.get("cgroup"):
            try:
                with open(request["cgroup"], "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"] if HERE else
                          wrapped(request["env"], request.get("per_run", ())))
        if HERE:
            as_forked(HERE[0])
        sys.argv = [os.path.join(os.path.dirname(os.path.abspath(agent.__file__)),
                                 "agent.py")] + list(request["argv"])
        code = agent.main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:   # noqa: B036  (whatever ended it, said in its log)
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code if isinstance(code, int) else 1)


def fork_here():
    """Fork this process as a run server (`serve` on pipes); each run is a fork of this
    process as it stands. Returns (its pid, the requests' write end, the replies' read end)."""
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:   # noqa: BLE001  (a closed or absent stream)
            pass
    started = dict((name, os.environ.get(name)) for name in ALLOCATOR_ENV)
    pid = os.fork()
    if pid:
        os.close(requests_r)
        os.close(replies_w)
        return pid, requests_w, replies_r
    code = 1
    try:
        os.close(requests_w)
        os.close(replies_r)
        os.setsid()
        HERE[:] = [started]
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        out = os.fdopen(replies_w, "w")

        def reply(record):
            out.write(json.dumps(record) + "\n")
            out.flush()

        serve(os.fdopen(requests_r), reply, replies_w)
        code = 0
    finally:
        os._exit(code)


def exit_code(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def wakeup():
    """A pipe SIGCHLD writes to, so the server waits on its run and host at once; its read
    end."""
    r, w = os.pipe()
    for fd in (r, w):
        os.set_blocking(fd, False)
    WAKEUP[:] = [r, w]
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(w)
    return r


def wait_run(pid, host, woken, parent):
    """The run's wait status; None where the host went first (requests hung up or this
    process orphaned), after killing the run's group, which nobody would read or stop."""
    poller = select.poll()
    poller.register(host, 0)            # hang-up and error alone
    poller.register(woken, select.POLLIN)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        gone = os.getppid() != parent
        for fd, _ in poller.poll(1000):
            if fd == woken:
                try:
                    os.read(woken, 512)
                except OSError:
                    pass
            else:
                gone = True
        if gone:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(pid, 0)
            return None


def serve(requests, reply, replies):
    loaded = {}     # file -> (mtime, size) of each module a preload imported
    woken, parent = wakeup(), os.getppid()
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        edited = changed(loaded)
        if edited is not None:      # a fresh server imports it as it reads now
            reply({"refused": "%s changed since it was imported" % edited, "stale": True})
            return
        if request.get("preload"):
            why = preload(request["preload"], loaded)
            if why is not None:
                reply({"refused": why})
                return
        if request.get("argv") is None:     # ready, and its preload imported: no run
            reply({"ready": True})
            continue
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            child(request, replies)
        reply({"pid": pid})
        status = wait_run(pid, requests.fileno(), woken, parent)
        if status is None:
            return
        reply({"exit": exit_code(status)})


def main():
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)   # what a preloaded module prints never reads as a reply
    warm_up()

    def reply(record):
        out.write(json.dumps(record) + "\n")
        out.flush()

    serve(sys.stdin, reply, out.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
