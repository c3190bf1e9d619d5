"""Where the test suite's CPU goes: each test's wall time and the CPU seconds it cost,
its child processes and containers included, which a process's own rusage does not
see (an agent that leaves with os._exit, a container's processes). Slurm's jobs run in
slurmd's groups and are not counted.

Two ways to count, chosen when the plugin loads:

- **cgroup** (root, cgroup v1 with a writable cpuacct hierarchy, as on CI's machines):
  each process of the run (each pytest-xdist worker, or the one pytest) moves itself
  into a cpuacct group of its own (`cpuacct/cpu-per-test/gwN`), so a test's count is
  the CPU its worker and every process the worker started used while it ran (`sys`:
  the kernel's share of it, which names a test that faults in much memory). A thread
  reads the engines' container groups (`cpuacct/docker/*`, `cpuacct/libpod_parent/*`)
  four times a second and credits a new container to the test running when it
  appeared, if one of the container's mounts lies under that worker's temporary folder
  (`pytest-of-USER/.../popen-gwN`, pytest's default: not with --basetemp). Containers
  that mount no pytest folder (an engine over TCP copies files in instead) are counted
  once, for the whole run. Works under `-n 6`, CI's run.
- **busy** (anywhere else): the machine's busy CPU seconds while a test ran. Only
  meaningful serially (no -n: one test at a time, so the machine's CPU is the test's).

    PYTHONPATH=tools python3 -m pytest -p cpu_per_test -q -n 6 --dist loadgroup
    python3 tools/cpu_per_test.py cpu-per-test.jsonl           (per file and per test)
    python3 tools/cpu_per_test.py cpu-per-test.jsonl --weights tests/durations.json

`--weights` writes each test's wall time (2 s or more) as the suite's hand-out order
weighs it (tests/conftest.py: under xdist the heaviest unit of work starts first).

The summary also prints the whole run's wall time and the machine's busy CPU seconds
over it, so what no test holds (the workers' start and collection, the engines'
daemons, Slurm's jobs, the kernel) is seen as the difference. CPU_PER_TEST_OUT names
another output file.
"""
from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OUT = os.environ.get("CPU_PER_TEST_OUT", "cpu-per-test.jsonl")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
ENGINE_GROUPS = ("docker", "libpod_parent")
UNDECIDED = "?"     # a container group seen before any process of it


def busy_seconds() -> float:
    """The machine's non-idle CPU seconds since boot, summed over its CPUs."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def usage(group: Path, kind: str = "usage") -> float | None:
    """A cpuacct group's CPU seconds (`kind` usage_sys: the kernel's share), or None once
    it is gone."""
    try:
        return int((group / f"cpuacct.{kind}").read_text()) / 1e9
    except (OSError, ValueError):
        return None


def own_group(worker: str) -> Path | None:
    """This process moved into a cpuacct group of its own, or None where it cannot be."""
    group = CPUACCT / "cpu-per-test" / worker
    try:
        group.mkdir(parents=True, exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return group


def mount_source(group: Path) -> str | None:
    """The source of the first mount of a process of the container group `group` under
    a pytest temporary folder (mountinfo's 4th field, for a bind mount of a host
    folder), "" where none is, or None while the group has no process to ask yet."""
    try:
        pid = (group / "tasks").read_text().split()[0]
        with open(f"/proc/{pid}/mountinfo") as f:
            return next((src for src in (line.split()[3] for line in f)
                         if "/pytest-of-" in src), "")
    except (OSError, IndexError):
        return None


class Containers(threading.Thread):
    """Samples the engines' container groups. A new container whose mount is under
    `mine` is credited to the test this process runs when it appears; one under another
    worker's folder is that worker's; one under no pytest folder is unattributed."""

    def __init__(self, mine: str | None) -> None:
        super().__init__(daemon=True)
        self.mine = mine                      # None: count the unattributed only
        self.test: str | None = None
        self.seen: dict[Path, list[Any]] = {}     # group -> [owner, CPU seconds]
        self.lock = threading.Lock()

    def groups(self) -> list[Path]:
        return [g for name in ENGINE_GROUPS if (CPUACCT / name).is_dir()
                for g in (CPUACCT / name).iterdir() if g.is_dir()]

    def owner(self, group: Path) -> str | None:
        src = mount_source(group)
        if src is None:
            return UNDECIDED
        if not src:
            return ""                         # unattributed
        if self.mine is not None and self.mine in src:
            return self.test
        return None                           # another worker's: not counted here

    def run(self) -> None:
        for g in self.groups():               # there before the run: not ours
            self.seen[g] = [None, 0.0]
        while True:
            for g in self.groups():
                now = usage(g)
                if now is None:
                    continue
                with self.lock:
                    if g not in self.seen:
                        self.seen[g] = [UNDECIDED, now]
                    if self.seen[g][0] == UNDECIDED:
                        self.seen[g][0] = self.owner(g)
                    self.seen[g][1] = now
            time.sleep(0.25)

    def holds(self, owner: str) -> bool:
        with self.lock:
            return any(v[0] == owner for v in self.seen.values())

    def take(self, owner: str) -> float:
        """CPU seconds of the containers credited to `owner` (each counted once)."""
        with self.lock:
            taken = [v for v in self.seen.values() if v[0] == owner]
            for v in taken:
                v[0] = None
            return float(sum(v[1] for v in taken))


try:
    import pytest
except ImportError:  # summarising needs no pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
    STATE: dict[str, Any] = {}

    def pytest_configure(config: Any) -> None:
        group = own_group(WORKER or "main")
        controller = not WORKER and bool(getattr(config.option, "numprocesses", None))
        STATE.update(group=group, t0=time.time(), b0=busy_seconds())
        if group is not None:
            mine = None if controller else (f"popen-{WORKER}/" if WORKER else "/pytest-of-")
            STATE["sampler"] = Containers(mine)
            STATE["sampler"].start()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
        group, sampler = STATE.get("group"), STATE.get("sampler")
        if sampler is not None:
            sampler.test = item.nodeid
        t0, b0 = time.time(), busy_seconds()
        c0 = usage(group) if group is not None else None
        s0 = usage(group, "usage_sys") if group is not None else None
        yield
        row: dict[str, Any] = {"id": item.nodeid, "worker": WORKER or "main", "t0": t0,
                               "wall": time.time() - t0, "busy": busy_seconds() - b0}
        if group is not None and sampler is not None:
            row["process"] = (usage(group) or 0.0) - (c0 or 0.0)
            row["sys"] = (usage(group, "usage_sys") or 0.0) - (s0 or 0.0)
            if sampler.holds(item.nodeid):
                time.sleep(0.3)               # the sampler's last look at its containers
            row["containers"] = sampler.take(item.nodeid)
            row["cpu"] = row["process"] + row["containers"]
        else:
            row["cpu"] = row["busy"]
        with open(OUT, "a") as f:
            f.write(json.dumps(row) + "\n")

    def pytest_unconfigure(config: Any) -> None:
        if WORKER:
            return
        sampler = STATE.get("sampler")
        with open(OUT, "a") as f:
            f.write(json.dumps({"run_wall": time.time() - STATE["t0"],
                                "run_busy": busy_seconds() - STATE["b0"],
                                "unattributed_containers":
                                    sampler.take("") if sampler is not None else None}) + "\n")


def main(path: str, top: int = 30) -> None:
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    rows = [r for r in lines if "id" in r]
    run = next((r for r in lines if "run_busy" in r), None)
    by_file: Counter[str] = Counter()
    wall: Counter[str] = Counter()
    inside: Counter[str] = Counter()
    for r in rows:
        name = r["id"].split("::")[0]
        by_file[name] += r["cpu"]
        wall[name] += r["wall"]
        inside[name] += r.get("containers", 0.0)
    cgroup = any("process" in r for r in rows)
    kernel = sum(r.get("sys", 0.0) for r in rows)
    print(f"{len(rows)} tests: {sum(r['cpu'] for r in rows):.0f} CPU-s"
          f"{f' ({sum(inside.values()):.0f} in containers)' if cgroup else ''}"
          f"{f', the kernel {kernel:.0f} of the processes' if kernel else ''}, "
          f"{sum(r['wall'] for r in rows):.0f} s of tests' wall time")
    if run is not None:
        loose = run["unattributed_containers"]
        print(f"the whole run: {run['run_wall']:.0f} s, the machine busy {run['run_busy']:.0f}"
              f" CPU-s" + (f"; containers that mount no test's folder {loose:.0f} CPU-s"
                           if loose is not None else ""))
    print(" CPU-s  in ctr  wall-s  file")
    for name, cpu in by_file.most_common(top):
        print(f"{cpu:6.1f} {inside[name]:7.1f} {wall[name]:7.1f}  {name}")
    print(" CPU-s  in ctr  wall-s  test")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        print(f"{r['cpu']:6.1f} {r.get('containers', 0.0):7.1f} {r['wall']:7.1f}  {r['id']}")


WEIGHED_S = 2.0     # a test under this weighs what its marks say (tests/conftest.py)


def weights(path: str, out: str) -> None:
    """Each test's wall time in the run `path` recorded, as tests/conftest.py reads it:
    node ids without xdist's "@group" suffix, whole seconds, the tests of WEIGHED_S or
    more."""
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    seconds = {re.sub(r"@(slurm|tests/[\w/]+\.py)$", "", r["id"]): round(r["wall"])
               for r in rows if r.get("wall", 0) >= WEIGHED_S}
    Path(out).write_text(json.dumps(dict(sorted(seconds.items())), indent=0) + "\n",
                         encoding="utf-8")
    print(f"{len(seconds)} tests of {WEIGHED_S:.0f} s or more weighed in {out}")


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)     # `| head`: end quietly, as a filter does
    if "--weights" in sys.argv:
        at = sys.argv.index("--weights")
        weights(sys.argv[1] if at > 1 else OUT, sys.argv[at + 1])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else OUT)
