"""A run forked from its host's own process (harness/agent/forkserver.py's `fork_here`:
the pytest plugin's test whose arguments cannot be pickled): what such a run takes as
its own before the agent runs, and what it says of the allocator it has.

Stdlib only, Python 3.6+."""
import gc
import os
import sys

ALLOCATOR_ENV = ("PYTHONMALLOC", "GLIBC_TUNABLES")


def malloc_objects():
    """Python's objects allocated by malloc from now on, as under PYTHONMALLOC=malloc, which
    only an interpreter's start reads: in a fork of a process started with pymalloc (the
    host's: pytest's), whose arenas are mmap'd, outside the heap mallinfo reads. The
    object and memory domains take malloc and calloc from the raw domain and keep
    pymalloc's realloc and free, which hand a block that is not in its arenas to the raw
    domain (as they always do for blocks over 512 bytes). True where this process's
    objects are malloc's now; False where the allocator is another (a debug or tracing
    hook, mimalloc) or cannot be told (before 3.8)."""
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
    """A run forked from its host's process (`fork_here`): its streams are this run's
    (not the host's, pytest's capture), what lived at the fork is out of the collector's
    sight (as a preload's), its objects are malloc's where the run asks PYTHONMALLOC=malloc
    (`malloc_objects`), and the allocator settings this process cannot take now (glibc's
    tunables, a pymalloc kept) read as the host's (`started`), as the header says them."""
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
