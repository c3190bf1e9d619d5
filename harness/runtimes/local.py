"""Run a cell as a subprocess of an interpreter or a cached venv (`venv_dirs`), and
doctor's checks of a local matrix (`local_checks`).

A cell gets a memory cgroup of its own where the host allows one (`CellCgroup`), so its
memory, `mem_limit:` and OOM kills are its own; else the host-wide OOM count is read.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from harness import gpu
from harness.errors import EnvironmentUnavailable, ImageUnavailable
from harness.matrixfile.lockfile import requirement_lines
from harness.matrixfile.model import Cell, ImageSpec, Matrix
from harness.runtimes import process, resolver
from harness.runtimes.base import (
    AGENT_DIR,
    Check,
    ImageInfo,
    Progress,
    RunOutcome,
    RunRequest,
    RuntimeBase,
    cpu_pressure,
)


def venv_dirs(cache: Path, version: str, reqs: list[str], hashed: list[str]) -> tuple[Path, Path]:
    """The venv of these pins under `version` (sys.version), and its NO_DEPS twin."""
    key = hashlib.sha256("\n".join([version, *reqs, *hashed]).encode()).hexdigest()[:16]
    return cache / "venvs" / key, cache / "venvs" / f"{key}-{NO_DEPS}"


def cache_dir() -> Path:
    base = os.environ.get("HARNESS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "harness")
    return Path(base)


def _tail(path: Path, size: int) -> str:
    """The last `size` bytes of a log a scenario may have flooded, without reading it all."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            return f.read(size).decode("utf-8", "replace")
    except OSError:
        return ""


def gpu_env(cell: Cell) -> dict[str, str]:
    """GPU selection for a local process, in PCI bus order so CUDA's device N is the
    matrix's (and NVML's) `gpu: N`."""
    if not cell.gpu.wants_gpu:
        return {"CUDA_VISIBLE_DEVICES": ""}
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if cell.gpu.value != "all":
        env["CUDA_VISIBLE_DEVICES"] = cell.gpu.value
        env["HARNESS_NVML_DEVICES"] = cell.gpu.value
    return env


# label of a culprit hybrid the resolver refused: why; its pins went in as listed (--no-deps)
NO_DEPS = "no-deps"
REFUSED_FILE = "harness-refused.txt"
# A lock image's pins and hashes, as pip installed them (--require-hashes), kept in its venv.
LOCK_FILE = "harness-lock.txt"


class PinsRefused(ImageUnavailable):
    """pip (or uv) would not install the requirements; `said` is why, in one line."""

    def __init__(self, message: str, said: str):
        super().__init__(message)
        self.said = said


# interpreter as named -> (the file that runs, its sys.version); that file -> the variables
_VERSIONS: dict[str, tuple[str, str]] = {}   # a shim would have set for it
_SHIM_ENV: dict[str, dict[str, str]] = {}


class LocalRuntime(RuntimeBase):
    """Runs cells as local subprocesses; `warm`: each forked from a warm interpreter."""

    name = "local"
    product = "local venvs"
    resolves_days = True    # `as_of:` pins resolved per day (`pins`)

    def __init__(self, cache: Path | None = None, warm: bool = False):
        self.cache = cache or cache_dir()
        self.warm = warm
        self._building: set[subprocess.Popen[bytes]] = set()
        self._versions = _VERSIONS

    def abort_prepare(self) -> None:
        """Ctrl-C: kill a running venv build now; its temporary folder is removed."""
        process.kill_all(self._building)

    def check(self, cells: list[Cell]) -> None:
        """A GPU for the cells that want one."""
        wants = sorted({c.id for c in cells if c.gpu.wants_gpu})
        if wants and not gpu.host_has_gpu():
            raise EnvironmentUnavailable(
                f"cells {', '.join(wants[:3])} ask for a GPU but this host has no NVIDIA "
                "driver (no /proc/driver/nvidia/gpus).\n  fix: run on a GPU host, or set "
                "`gpu: [none]` in the matrix")

    def resolve_ahead(self, cells: list[Cell], progress: Progress) -> None:
        """Resolve every dated image now, so a day too early (exit 2) or an index that
        does not answer (exit 3) stops the sweep before its first cell."""
        dated = sorted({c.image for c in cells if c.image.as_of}, key=lambda i: i.index)
        todo = []
        for image in dated:
            _, version = self._python(image)  # each interpreter once, before threads
            assert image.as_of is not None
            if resolver.cached(self.cache, image.pip, image.as_of, version) is None:
                todo.append(image)
        if not todo:
            return
        progress(f"resolving {len(todo)} dated image(s) as the package index stood on "
                 f"their days ({len(dated) - len(todo)} known from earlier sweeps)")
        # Resolving waits on the index: a few days at once; the first day's error wins.
        with ThreadPoolExecutor(max_workers=4) as pool:
            running = {pool.submit(self.pins, image): image for image in todo}
            for n, done in enumerate(as_completed(running), 1):
                if done.exception() is None:
                    progress(f"resolved {running[done].label} ({n}/{len(todo)}): "
                             f"{len(done.result())} pin(s)")
        for done in running:        # in day order
            done.result()

    def _interpreter(self, name: str) -> str:
        found = shutil.which(name) if os.sep not in name else (name if os.access(
            name, os.X_OK) else None)
        if found is None:
            raise ImageUnavailable(f"Python interpreter {name!r} not found on PATH.\n  fix: "
                                   "install it, or name an existing one in the image's `python:`")
        return found

    def _python(self, image: ImageSpec) -> tuple[str, str]:
        """The image's interpreter as the file that runs (not a shim), and its sys.version."""
        named = self._interpreter(image.python or (image.ref if not image.pip else
                                                   sys.executable))
        if named not in self._versions:     # asked once a process
            rc, runs, version, shim_env = process.python_probe(named)
            if rc != 0:
                raise ImageUnavailable(f"{image.label}: interpreter {named} does not run: "
                                       f"{version[:300]}\n  fix: install it or name "
                                       "another interpreter")
            self._versions[named], _SHIM_ENV[runs] = (runs, version), shim_env
        return self._versions[named]

    def pins(self, image: ImageSpec) -> tuple[str, ...]:
        """A dated image's requirements as resolved on its day (cached on disk forever).

        Raises:
            resolver.TooEarly: nothing matched that day (exit 2).
            resolver.Unreachable: the index did not answer (exit 3).
        """
        assert image.as_of is not None
        python, version = self._python(image)
        return resolver.resolve(image.pip, image.as_of, python, version, self.cache,
                                image.label)

    def prepare(self, image: ImageSpec, progress: Progress) -> ImageInfo:
        start = time.monotonic()
        python, version = self._python(image)
        if not image.pip:
            return ImageInfo(ref=image.ref, digest=f"python {version.split()[0]}",
                             python=python, prepare_s=time.monotonic() - start)
        labels: dict[str, str] = {}
        reqs = sorted(image.pip)
        if image.as_of:
            # Two days that resolve alike share one venv: the key is the pins, not the day.
            reqs = list(self.pins(image))
            labels = {"as_of": image.as_of, "requirements": " ".join(sorted(image.pip)),
                      "pins": " ".join(reqs),
                      # the resolver's flags, and a pin the index marks yanked
                      **resolver.notes(self.cache, image.pip, image.as_of, version)}
        hashed = requirement_lines(image.hashes)     # a lock's pins with their hashes
        venv, loose = venv_dirs(self.cache, version, reqs, hashed)   # loose: pins refused
        if image.hybrid and not (venv / "bin" / "python").exists() and (
                loose / "bin" / "python").exists():
            venv = loose
        vpy = venv / "bin" / "python"
        if not vpy.exists():
            try:
                self._build(python, reqs, venv, progress, image.label, image.as_of,
                            hashed=hashed)
            except PinsRefused as exc:
                if not image.hybrid:
                    raise
                # A culprit hybrid splits packages pinned together: install as listed.
                progress(f"{image.label}: {exc.said}; installing the pins as listed "
                         "(--no-deps)")
                venv = loose
                self._build(python, reqs, venv, progress, image.label, no_deps=exc.said,
                            hashed=hashed)
                vpy = venv / "bin" / "python"
        else:
            progress(f"{image.label}: cached venv {venv}")
        if venv == loose:
            refused = (venv / REFUSED_FILE).read_text() if (venv / REFUSED_FILE).exists() \
                else "the resolver refused these pins together"
            labels[NO_DEPS] = refused.strip()
        return ImageInfo(ref=" ".join(reqs), digest=f"venv:{venv.name}", python=str(vpy),
                         labels={"venv": str(venv), **labels},
                         prepare_s=time.monotonic() - start)

    def _build(self, python: str, reqs: list[str], venv: Path, progress: Progress,
               label: str, as_of: str | None = None, no_deps: str | None = None,
               hashed: list[str] | None = None) -> None:
        """Build the venv at `venv` once, locked; `no_deps`: why `reqs` were refused."""
        venv.parent.mkdir(parents=True, exist_ok=True)
        with (venv.parent / f"{venv.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two sweeps building the same venv
            if (venv / "bin" / "python").exists():
                return
            tmp = venv.parent / f"{venv.name}.tmp{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                self._build_into(python, reqs, tmp, progress, label, as_of,
                                 no_deps is not None, hashed)
                if no_deps is not None:
                    (tmp / REFUSED_FILE).write_text(no_deps + "\n")
                os.replace(tmp, venv)
            finally:
                # Ctrl-C or a failed pip: no half-built venv is left behind.
                shutil.rmtree(tmp, ignore_errors=True)

    def _build_into(self, python: str, reqs: list[str], tmp: Path, progress: Progress,
                    label: str, as_of: str | None = None, no_deps: bool = False,
                    hashed: list[str] | None = None) -> None:
        """A venv at `tmp` with `reqs`, by uv where installed (much faster), else pip.

        Args:
            as_of, no_deps: Only files uploaded before that day; no dependency resolved.
            hashed: A lock's lines with `--hash`es, installed with `--require-hashes`.

        Raises: PinsRefused: the installer refused them; ImageUnavailable: no venv made.
        """
        uv = resolver.uv_bin()
        tool = "uv" if uv else "pip"
        progress(f"{label}: building venv with {' '.join(reqs)} ({tool}"
                 f"{', hashes checked' if hashed else ''})")
        made = ([uv, "venv", "-q", "--python", python, str(tmp)] if uv
                else [python, "-m", "venv", str(tmp)])
        rc, out = process.check_output(made, timeout=300)
        if rc != 0:
            raise ImageUnavailable(f"{label}: `{' '.join(made[:-1])}` failed: "
                                   f"{out.strip()[-300:]}")
        tail: list[str] = []

        def line(text: str) -> None:
            tail.append(text)
            del tail[:-30]
            if text.startswith(("Collecting", "Successfully", "Installed", "Resolved")):
                progress(f"{label}: {tool}: {text.strip()}")

        vpy = str(tmp / "bin" / "python")
        loose = ["--no-deps"] if no_deps else []
        wanted = reqs
        if hashed:
            (tmp / LOCK_FILE).write_text("\n".join(hashed) + "\n")
            wanted = ["--require-hashes", "-r", str(tmp / LOCK_FILE)]
        if uv:
            argv = [uv, "pip", "install", "--python", vpy, *loose, *wanted]
            if as_of:
                argv[3:3] = ["--exclude-newer", resolver.cutoff(as_of)]
        else:
            argv = [vpy, "-m", "pip", "install", "--disable-pip-version-check", "-q",
                    "--progress-bar", "off", *loose, *wanted]
        rc = process.stream_lines(argv, on_line=line, running=self._building)
        if rc != 0:
            said = short_pip_error(tail) if tail else f"exit {rc}"
            raise PinsRefused(f"{'uv pip' if uv else 'pip'} cannot install "
                              f"{' '.join(reqs)}{' (--no-deps)' if no_deps else ''}: "
                              f"{said}\n  fix: check that these versions exist for this "
                              f"Python ({python})", said)

    def run(self, request: RunRequest, progress: Progress) -> RunOutcome:
        cell = request.cell
        out = (request.outdir / "samples.jsonl").absolute()
        args = request.agent_args(str(AGENT_DIR / "agent.py"), str(cell.scenario.script),
                                  str(out), str(request.control.absolute()))
        env = _environment(request)
        host: list[dict[str, object]] = []
        pid_box: list[int] = []
        t0 = time.monotonic()

        def poll() -> None:
            if request.cancelled():
                raise KeyboardInterrupt  # run_with_deadline kills the process group
            if pid_box:
                try:
                    with open(f"/proc/{pid_box[0]}/statm") as f:
                        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                    host.append({"t": round(time.monotonic() - t0, 3), "rss": rss,
                                 **cpu_pressure()})
                except (OSError, ValueError, IndexError):
                    pass

        log = request.outdir / "agent.log"
        argv = [request.image.python, *args]
        # The cell's own cgroup where allowed; else the host-wide OOM count.
        cgroup = CellCgroup.make(cell.id, None)
        kills_before = vmstat_oom_kills()
        try:
            finished = process.run_with_deadline(
                cgroup.wrap(argv) if cgroup else argv, env=env, log=log,
                deadline_s=cell.settings.timeout, cwd=cell.scenario.script.parent,
                on_start=pid_box.append, poll=poll, warm=process.Warm(
                    argv[0], AGENT_DIR / "forkserver.py", args[1:], cell.scenario.script,
                    cgroup.path / "cgroup.procs" if cgroup else None) if self.warm else None)
        finally:
            ending = cgroup.ending() if cgroup else None
            if cgroup:
                cgroup.remove()
        tail = _tail(log, 8000)
        details: dict[str, object] = {}
        if cell.settings.mem_limit:
            details["mem_limit"] = "not applied by the local runtime"
        code = finished.returncode
        killed = code in (-9, 137)
        oom = False
        if ending is not None:
            details["cgroup"] = "the cell's own"
            if ending.peak is not None:
                details["host_max_usage"] = ending.peak
            oom = killed and ending.oom_kills > 0
        elif killed and kills_before is not None:
            after = vmstat_oom_kills()
            if after is not None and after > kills_before:
                oom = True
                details["oom_kills_host_wide"] = after - kills_before
        if oom:
            details["oom"] = ("the kernel's OOM killer " + (
                f"killed it in the cell's cgroup (oom_kill {ending.oom_kills})" if ending
                else "fired during the run (/proc/vmstat oom_kill rose; the cell had no "
                "cgroup of its own)"))
            if "host_max_usage" not in details and host:
                details["host_max_usage"] = max(int(str(h["rss"])) for h in host)
        return RunOutcome(exit_code=code, timed_out=finished.timed_out,
                          oom_killed=oom, duration_s=finished.duration_s,
                          host_samples=host, log_tail=tail, details=details)

    def run_warm(self) -> None:
        """Fork each run from now on from a warm interpreter (`warm`)."""
        self.warm = True

    def warm_ahead(self, cell: Cell, scripts: list[Path]) -> None:
        """Start now the warm server `cell` forks from, `scripts` imported."""
        info = self.prepare(cell.image, lambda _: None)
        env = _environment(RunRequest(cell, info, Path(os.devnull), Path(os.devnull)))
        process.warm_ahead(process.Warm(info.python, AGENT_DIR / "forkserver.py", (), None,
                                        None), env, scripts)

    def cleanup(self) -> int:
        """Subprocesses die with their group; nothing persists between sweeps."""
        return 0


def _environment(request: RunRequest) -> dict[str, str]:
    """A run's environment: ours (but PYTHON*), the shim's, the cell's and its GPUs'."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(_SHIM_ENV.get(request.image.python, {}))
    env.update(request.environment())
    env.update(gpu_env(request.cell))
    return env


# ---------------------------------------------- a memory cgroup of the cell's own

ROOT = Path("/sys/fs/cgroup")
_NAMES = itertools.count()


# A memory cgroup's files by version, named as an engine's stats name them.
FILES = {1: {"usage": "memory.usage_in_bytes", "max_usage": "memory.max_usage_in_bytes",
             "limit": "memory.limit_in_bytes", "rss": "rss", "events": "memory.oom_control"},
         2: {"usage": "memory.current", "max_usage": "memory.peak", "limit": "memory.max",
             "rss": "anon", "events": "memory.events"}}


@dataclass(frozen=True)
class Ending:
    """What the cell's cgroup saw: OOM kills in it, its peak and its limit (bytes)."""

    oom_kills: int
    peak: int | None
    limit: int | None


def memory_cgroups(lines: list[str], root: Path = ROOT) -> Iterator[tuple[Path, int]]:
    """The memory cgroup directories and versions a /proc/<pid>/cgroup names, v1 first."""
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            yield root / "memory" / path.lstrip("/"), 1
    for line in lines:
        if line.startswith("0::"):
            yield root / line[3:].lstrip("/"), 2


def _own_memory_cgroup() -> tuple[Path, int] | None:
    """The harness's own memory cgroup directory and its version, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for here, version in memory_cgroups(lines):
        if version == 1:
            return here, 1
        try:
            if "memory" in (here / "cgroup.subtree_control").read_text().split():
                return here, 2
        except OSError:
            return None
    return None


def read_int(path: Path) -> int | None:
    """A one-number file's value (None: unreadable, or not a number: "max")."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _limit(path: Path) -> int | None:
    """A memory limit file's bytes; None for none ("max", or v1's near-2**63 default)."""
    limit = read_int(path)
    return limit if limit is not None and limit < 1 << 60 else None


def counter(path: Path, key: str) -> int:
    """A "key value" line's value in a flat keyed file (0 where absent)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _limited(path: Path, version: int) -> bool:
    """Whether a memory limit holds the cgroup at `path` or one above it."""
    name = FILES[version]["limit"]
    for d in (path, *path.parents):
        if d == ROOT or ROOT not in d.parents:
            break
        if _limit(d / name) is not None:
            return True
    return False


def memory_now(path: Path, version: int) -> dict[str, int | None] | None:
    """The cgroup's memory in bytes as an engine's stats give it; None: it is gone."""
    files = FILES[version]
    usage = read_int(path / files["usage"])
    if usage is None:
        return None
    return {"usage": usage, "max_usage": read_int(path / files["max_usage"]),
            "limit": _limit(path / files["limit"]),
            "rss": counter(path / "memory.stat", files["rss"])}


def vmstat_oom_kills() -> int | None:
    """The kernel's count of OOM kills since boot, host-wide (None: not read)."""
    path = Path("/proc/vmstat")
    return counter(path, "oom_kill") if path.exists() else None


@dataclass
class CellCgroup:
    """One cell's memory cgroup: `make`, joined through `wrap`, read by `ending`, `remove`."""

    path: Path
    version: int

    @classmethod
    def make(cls, cell_id: str, limit: int | None, inside_limits: bool = False
             ) -> CellCgroup | None:
        """A new cgroup for the cell below the harness's own, limited to `limit` bytes;
        None where the host allows none, or (unless `inside_limits`) where a limit holds
        the harness already (a Slurm job's must see the OOM kill)."""
        own = _own_memory_cgroup()
        if own is None:
            return None
        parent, version = own
        if not inside_limits and _limited(parent, version):
            return None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cell_id)[:80]
        path = parent / f"harness-{os.getpid()}-{next(_NAMES)}-{safe}"
        try:
            path.mkdir()
        except OSError:
            return None
        made = cls(path, version)
        if limit is not None:
            name = "memory.limit_in_bytes" if version == 1 else "memory.max"
            try:
                (path / name).write_text(str(limit))
            except OSError:
                made.remove()
                return None
        return made

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the cgroup: a shell joins it, then execs the command."""
        return ["/bin/sh", "-c", 'echo $$ > "$1" 2>/dev/null; shift; exec "$@"', "sh",
                str(self.path / "cgroup.procs"), *argv]

    def ending(self) -> Ending:
        """OOM kills in the cgroup, its peak and its limit."""
        files = FILES[self.version]
        return Ending(counter(self.path / files["events"], "oom_kill"),
                      read_int(self.path / files["max_usage"]), _limit(self.path / files["limit"]))

    def remove(self) -> None:
        """Remove the cgroup, killing what is left; tried only briefly."""
        wait, end = 0.001, time.monotonic() + 0.2
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                self._kill_left()
                left = end - time.monotonic()
                if left <= 0:
                    return
                time.sleep(min(wait, left))
                wait *= 2

    def _kill_left(self) -> None:
        try:
            pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------- why pip or uv would not install

def short_pip_error(lines: list[str]) -> str:
    """The line of pip's output that says why, its list of versions shortened."""
    errors = [t.strip()[len("ERROR:"):].strip() for t in lines if t.startswith("ERROR")]
    if not errors and (said := _uv_said(lines)):
        return said[-1]
    versions = next((e for e in errors if "(from versions:" in e), None)
    last = next((e for e in reversed(errors) if "(from versions:" not in e),
                errors[-1] if errors else (lines[-1].strip() if lines else "no output"))
    if versions is not None:
        listed = versions.split("(from versions:", 1)[1].rstrip(")").split(",")
        listed = [v.strip() for v in listed if v.strip() and v.strip() != "none"]
        if listed:
            last += f" (versions: {listed[0]} .. {listed[-1]}, {len(listed)} in all)"
        else:
            last += " (no versions at all: is the package name right?)"
    return last


def _uv_said(lines: list[str]) -> list[str]:
    """uv's `error:` and `cause:` messages, rejoined from their wrapped lines."""
    said: list[list[str]] = []
    for text in lines:
        words = text.strip()
        if words.startswith(("error:", "cause:")):
            said.append([words.split(":", 1)[1].strip()])
        elif said and words and text[:1].isspace():
            if set(words) <= {"^"}:      # the line above is the input uv echoes
                said[-1][1:] = said[-1][1:-1]
            else:
                said[-1].append(words)
    return [" ".join(parts) for parts in said]


# ---------------------------------------------- harness doctor for a local matrix

RESOLVE_TIMEOUT_S = 120.0


def interpreter(image: ImageSpec) -> str:
    """The interpreter a local image runs (or builds its venv with)."""
    return image.python or (image.ref if not image.pip else sys.executable)


def built(image: ImageSpec, version: str) -> Path | None:
    """The sweep's cached venv of an undated image's pins; None where none was built."""
    for venv in venv_dirs(cache_dir(), version, sorted(image.pip),
                          requirement_lines(image.hashes)):
        if (venv / "bin" / "python").exists():
            return venv
    return None


def _image_checks(image: ImageSpec) -> Iterator[Check]:
    name = interpreter(image)
    found = shutil.which(name) if os.sep not in name else (
        name if os.access(name, os.X_OK) else None)
    if found is None:
        yield ("FAIL", f"image {image.label}: interpreter {name!r} not found",
               "install it, or name an existing one in the image's `python:`")
        return
    # the runtime's own probe: its sys.version is the one a cached venv's key holds
    rc, _, version, _ = process.python_probe(found)
    if rc != 0:
        yield ("FAIL", f"image {image.label}: interpreter {found} does not run: "
                       f"{version[-200:]}", "install it, or name another interpreter")
        return
    yield ("ok", f"image {image.label}: Python {version.split()[0]} ({found})", "")
    if not image.pip:
        return
    if image.as_of:
        yield _dated_check(image)
        return
    venv = built(image, version)
    if venv is not None:    # a sweep installed them: no index asked again
        yield ("ok", f"image {image.label}: pins installed ({' '.join(image.pip)}; cached "
                     f"venv {venv})", "")
        return
    rc, out = process.check_output(
        [found, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
         "--disable-pip-version-check", *image.pip], timeout=RESOLVE_TIMEOUT_S)
    if rc == 0:
        yield ("ok", f"image {image.label}: pins resolve ({' '.join(image.pip)})", "")
    elif rc == 124:     # time-boxed: a slow or unreachable index is not a wrong pin
        yield ("warn", f"image {image.label}: pins not checked: pip found no answer from "
                       f"its index in {RESOLVE_TIMEOUT_S:.0f} s",
               "check the index pip uses (pip config list) answers from this host")
    elif "no such option: --dry-run" in out:
        yield ("warn", f"image {image.label}: pip of {found} is too old to check pins "
                       "without installing them", f"{found} -m pip install -U pip")
    else:
        yield ("FAIL", f"image {image.label}: pins do not resolve: "
                       f"{short_pip_error(out.splitlines())}",
               "check that these versions exist for this Python (and the index pip uses)")


def _dated_check(image: ImageSpec) -> Check:
    """A dated image's requirements resolved as of its day, as the sweep resolves them."""
    try:
        pins = LocalRuntime().pins(image)
    except resolver.ResolveError as exc:
        problem, _, fix = str(exc).partition("\n  fix: ")
        return ("FAIL", problem, fix)
    return ("ok", f"image {image.label}: {' '.join(image.pip)} resolves as of "
                  f"{image.as_of} to {len(pins)} pins", "")


def _writable(out: Path) -> Check:
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:   # access() says yes to root everywhere, /proc included: try it
        fd, name = tempfile.mkstemp(dir=probe, prefix=".harness-doctor")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return ("FAIL", f"results directory {out}: cannot be written ({probe}: "
                        f"{exc.strerror})", "pass --out DIR you can write")
    return ("ok", f"results directory {out}: writable", "")


def local_checks(matrix: Matrix, out: Path) -> Iterator[Check]:
    """Every check of a local matrix, in order."""
    for image in matrix.images:
        yield from _image_checks(image)
    yield _writable(out)
