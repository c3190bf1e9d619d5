"""Which processes a command's CPU went to, by name: every process on the machine that
ends while it runs (containers' included, short-lived ones too: run it on an otherwise
quiet machine), from the kernel's process accounting (acct(2): a 64-byte record per
process as it exits, with its name, user and system time). Needs root and a kernel with
BSD process accounting.

    sudo python3 tools/cpu_by_process.py -- python3 -m pytest -q -n 4 --dist loadgroup

A process still running at the end (an engine, a daemon) is not counted: its own
/proc/PID/stat times before and after are listed for the engines named in DAEMONS.
Threads count with their process. `--keep FILE` keeps the accounting records.

`--kinds` also reads every process's command line from /proc every 20 ms while the
command runs, and groups the Python processes by what they ran (`kind`): an agent
started as a fresh interpreter or forked from a warm server (and that server), its
second agent (`--as-user`), a harness command by its subcommand, pytest and its xdist
workers, pip/uv, a benchmark. A process that lived less than the poll's period may be
missed ("python, command line not seen"). The accounting's times are tick-sampled: a
short process can read 0; sums over many are right.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

RECORD = "<cBHIIIIIIf8H16s"          # struct acct_v3 (linux/acct.h)
DAEMONS = ("dockerd", "containerd", "podman", "slurmctld", "slurmd")


def acct(path: str | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(path.encode() if path else None) != 0:
        err = ctypes.get_errno()
        sys.exit(f"cpu_by_process: acct({path}) failed: {os.strerror(err)} (root, and a "
                 "kernel with CONFIG_BSD_PROCESS_ACCT, are needed)")


def comp_t(v: int) -> int:
    """A comp_t: 13-bit mantissa, 3-bit base-8 exponent."""
    return (v & 0x1FFF) << (3 * (v >> 13))


def records(path: str) -> list[tuple[str, float, int, bool]]:
    """(name, CPU seconds, pid, forked without exec) of each process the file records."""
    data = Path(path).read_bytes()
    size = struct.calcsize(RECORD)
    hz = 100                                     # AHZ: the unit of ac_utime, ac_stime
    out = []
    for off in range(0, len(data) - size + 1, size):
        f = struct.unpack_from(RECORD, data, off)
        out.append((f[-1].split(b"\0")[0].decode("latin-1"),
                    (comp_t(f[10]) + comp_t(f[11])) / hz, f[6], bool(f[0][0] & 1)))
    return out


def poll_cmdlines(seen: dict[int, str], stop: threading.Event) -> None:
    """Each process's latest command line into `seen`, every 20 ms until `stop`."""
    while not stop.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if raw:
                seen[int(pid)] = raw.replace(b"\0", b" ").decode("utf-8", "replace")[:400]
        time.sleep(0.02)


def kind(name: str, cmdline: str | None, forked: bool) -> str:
    """What a process ran, as `--kinds` groups it."""
    if not name.startswith("python"):
        return name
    if cmdline is None:
        return "python, command line not seen"
    if "forkserver.py" in cmdline:
        return "agent, forked from a warm server" if forked else "warm server"
    if "agent.py" in cmdline:
        second = "--iterations 2000000" in cmdline      # asuser.MOST_CALLS
        return "agent's second run (--as-user)" if second else "agent, fresh interpreter"
    m = re.search(r"(?:bin/harness|-m harness)\s+(\S+)", cmdline)
    if m:
        return f"harness {m[1]}"
    if "xdist" in cmdline or "execnet" in cmdline or "exec(eval(sys.stdin" in cmdline:
        return "pytest-xdist worker (tests run in it)"
    if "pytest" in cmdline:
        return "pytest" + (", forked" if forked else "")
    if re.search(r"\b(pip|uv|venv|ensurepip)\b", cmdline):
        return "pip/uv/venv"
    m = re.search(r"benchmarks/(\w+)\.py", cmdline)
    if m:
        return f"benchmark {m[1]}"
    return "python, other"


def daemons() -> dict[int, tuple[str, float]]:
    tck = os.sysconf("SC_CLK_TCK")
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if name in DAEMONS:
            f = stat[stat.rindex(")") + 2:].split()
            found[int(pid)] = (name, (int(f[11]) + int(f[12])) / tck)
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", help="write the accounting records here and keep them")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--kinds", action="store_true",
                   help="group Python processes by the command line they ran")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("name a command after --")
    path = a.keep or tempfile.mkstemp(suffix=".pacct")[1]
    open(path, "wb").close()
    before = daemons()
    seen: dict[int, str] = {}
    stop = threading.Event()
    poller = threading.Thread(target=poll_cmdlines, args=(seen, stop), daemon=True)
    if a.kinds:
        poller.start()
    acct(path)
    try:
        code = subprocess.call(cmd)
    finally:
        acct(None)
        stop.set()
    after = daemons()
    by: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    recs = records(path)
    for name, cpu, pid, forked in recs:
        key = kind(name, seen.get(pid), forked) if a.kinds else name
        by[key][0] += 1
        by[key][1] += cpu
    print(f"\n{len(recs)} processes ended, {sum(c for _, c, _, _ in recs):.1f} CPU-s")
    print(f"{'CPU-s':>8} {'count':>6}  name")
    for name, (n, cpu) in sorted(by.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print(f"{cpu:8.1f} {int(n):6d}  {name}")
    for pid, (name, cpu) in sorted(after.items()):
        if pid in before:
            print(f"{cpu - before[pid][1]:8.1f} {'(run)':>6}  {name} [{pid}], still running")
    if not a.keep:
        os.unlink(path)
    return code


if __name__ == "__main__":
    sys.exit(main())
