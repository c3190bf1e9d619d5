"""A step whose module starts a native thread at import (TensorFlow's thread pools, as a
tf.function first runs) must not be forked from a server that imported it: the fork
copies no thread, and a run that waits on one waits for ever (a TensorFlow step hung
`harness.check` and the pytest plugin). The server counts the OS threads an import
starts, less those of a pool known to re-make itself after a fork (OpenBLAS's, so
numpy's warm import stays), and refuses: the run imports the module itself."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from loadfile import load_file

from harness.api import check

AGENT_DIR = Path(__file__).resolve().parents[2] / "harness" / "agent"
linux = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="no /proc")


def _forkserver() -> ModuleType:
    return load_file(AGENT_DIR / "forkserver.py", "forkserver_t", folder_on_path=True)


def test_native_threads_an_import_started_are_unsafe_less_python_and_pool_ones() -> None:
    fs = _forkserver()
    assert fs.unsafe_threads(1, 1, 0, 0) == 0
    assert fs.unsafe_threads(1, 6, 0, 1) == 4      # TensorFlow's pool beside OpenBLAS's
    assert fs.unsafe_threads(2, 17, 0, 15) == 0    # OpenBLAS's pool alone (16 cores)
    assert fs.unsafe_threads(1, 2, 1, 0) == 0      # a Python thread: refused on its own
    assert fs.unsafe_threads(None, 9, 0, 0) == 0   # no /proc: cannot tell


@linux
def test_openblas_pool_is_counted_as_fork_safe() -> None:
    np = pytest.importorskip("numpy")
    del np
    fs = _forkserver()
    probe = textwrap.dedent('''
        import os, sys
        sys.path.insert(0, sys.argv[1])
        import forkserver
        before, safe = forkserver.os_threads(), forkserver.fork_safe_threads()
        import numpy
        after = forkserver.os_threads()
        print(after - before, forkserver.fork_safe_threads() - safe,
              forkserver.unsafe_threads(before, after, 0, forkserver.fork_safe_threads() - safe))
    ''')
    # a fresh interpreter: this one may have imported numpy already
    out = subprocess.run([sys.executable, "-c", probe, str(AGENT_DIR)], check=True,
                         capture_output=True, text=True).stdout.split()
    started, safe, unsafe = map(int, out)
    assert started == safe and unsafe == 0, out
    assert fs.os_threads() >= 1


NATIVE = '''
import ctypes
import os
import time

# a thread of no Python: libc's sleep(3600) as its start routine
LIBC = ctypes.CDLL(None)
_before = set(os.listdir("/proc/self/task"))
_tid = ctypes.c_ulong()
assert LIBC.pthread_create(ctypes.byref(_tid), None, LIBC.sleep, ctypes.c_void_p(3600)) == 0
for _ in range(1000):
    _new = set(os.listdir("/proc/self/task")) - _before
    if _new:
        break
    time.sleep(0.001)
(NATIVE_TID,) = _new


def step():
    assert os.path.exists("/proc/self/task/%s" % NATIVE_TID), \\
        "the module's native thread is gone (a forked run)"
'''


@linux
def test_a_module_that_starts_a_native_thread_runs_where_it_was_imported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"native_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(NATIVE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    try:
        for _ in range(2):      # the refusal, then a server that preloads nothing
            got = check(module.step, budget="300ms", settings={"timeout": "20s"})
            assert not got.bad, got     # a forked run: crash, the thread gone
    finally:
        sys.modules.pop(name, None)
