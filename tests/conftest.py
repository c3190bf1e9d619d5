"""Test-wide guards: unmarked tests must not touch Docker; `docker`/`gpu` tests need one.

- An unmarked test that calls `docker.from_env()` or builds a `docker.DockerClient`
  fails (nox's conftest does the same for external tools): a unit test must use
  `FakeRuntime`, never an engine that may or may not be there.
- Tests marked `docker` skip when no engine answers, unless HARNESS_REQUIRE_DOCKER=1
  (CI), where they fail with the reason instead of silently passing.
- Tests marked `podman` skip when podman's Docker-compatible service does not answer
  (its socket: `harness.runtimes.podman.default_socket`), unless HARNESS_REQUIRE_PODMAN=1
  (CI, after `bash images/setup-podman.sh`), where they fail instead.
- Tests marked `gpu` skip unless /proc/driver/nvidia/gpus lists a GPU.
- Tests marked `slurm` skip when `sinfo` does not answer, unless HARNESS_REQUIRE_SLURM=1
  (CI, after `bash images/setup-slurm.sh`), where they fail instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sweepkit import FakeSweep

REQUIRE_DOCKER = "HARNESS_REQUIRE_DOCKER"
REQUIRE_SLURM = "HARNESS_REQUIRE_SLURM"
REQUIRE_PODMAN = "HARNESS_REQUIRE_PODMAN"
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")

_engine_state: dict[str, str | None] = {}
# No test reads a package index: culprit's code step (harness/runtimes/sources.py) says
# "code not read: offline" unless a test sets up its own index and clears this.
os.environ.setdefault("HARNESS_OFFLINE", "1")

# A pytest-xdist worker starts with COLUMNS=80 and LINES=24 in its environment where the
# run that started it had neither, and output written as to a pipe wraps at COLUMNS
# (harness/report/grid.py): a test would pass alone and fail under `-n`. So the run that
# starts the workers says what it had, and each worker takes that back.
_TERMINAL = "HARNESS_TESTS_TERMINAL"
if os.environ.get("PYTEST_XDIST_WORKER") is None:
    os.environ[_TERMINAL] = json.dumps({k: os.environ.get(k) for k in ("COLUMNS", "LINES")})
else:
    for _name, _value in json.loads(os.environ.get(_TERMINAL, "{}")).items():
        if _value is None:
            os.environ.pop(_name, None)
        else:
            os.environ[_name] = _value


def _ping_reason(key: str, client_of: Callable[[Any], Any]) -> str | None:
    """None when the engine that `client_of(docker)` opens answers ping(); otherwise why
    not. Asked once per session (per xdist worker) and kept under `key`."""
    if key not in _engine_state:
        try:
            import docker

            client = client_of(docker)
            try:
                client.ping()
            finally:
                client.close()
            _engine_state[key] = None
        except Exception as exc:  # any failure means "no engine here"
            _engine_state[key] = f"{type(exc).__name__}: {exc}"
    return _engine_state[key]


def docker_unavailable_reason() -> str | None:
    """None when a Docker engine answers ping(); otherwise why not (cached per session)."""
    return _ping_reason("reason", lambda docker: docker.from_env(timeout=5))


def podman_unavailable_reason() -> str | None:
    """None when podman's service answers ping() on its socket; else why not (cached)."""
    from harness.runtimes.podman import default_socket

    # a fixed API version: docker-py's `auto` asks /version, which podman answers by
    # running dpkg-query for three of its tools (the runtime reads its ping's instead)
    return _ping_reason("podman", lambda docker: docker.DockerClient(
        base_url=default_socket(), version="1.41", timeout=5))


def slurm_unavailable_reason() -> str | None:
    """None when `sinfo` lists a node that is up; otherwise why not (cached)."""
    if "slurm" not in _engine_state:
        import subprocess

        try:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                                 timeout=20, check=False)
            states = out.stdout.split()
            ok = out.returncode == 0 and any(s.rstrip("*~#") in ("idle", "mix", "alloc")
                                             for s in states)
            _engine_state["slurm"] = None if ok else (
                f"sinfo exit {out.returncode}: {(out.stderr or out.stdout).strip()[:200]}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            _engine_state["slurm"] = f"{type(exc).__name__}: {exc}"
    return _engine_state["slurm"]


def gpu_present(root: Path = NVIDIA_GPUS) -> bool:
    try:
        return any(root.iterdir())
    except OSError:
        return False


def _engine_missing(item: pytest.Item, reason: str) -> None:
    if os.environ.get(REQUIRE_DOCKER) == "1":
        pytest.fail(f"{item.nodeid} needs a Docker engine and {REQUIRE_DOCKER}=1, but none "
                    f"answers: {reason}\n  fix: start dockerd (`bash images/setup-engine.sh`) or "
                    f"unset {REQUIRE_DOCKER}", pytrace=False)
    pytest.skip(f"no Docker engine: {reason}")


def _podman_missing(item: pytest.Item, reason: str) -> None:
    if os.environ.get(REQUIRE_PODMAN) == "1":
        pytest.fail(f"{item.nodeid} needs podman and {REQUIRE_PODMAN}=1, but its service "
                    f"does not answer: {reason}\n  fix: bash images/setup-podman.sh",
                    pytrace=False)
    pytest.skip(f"no podman service: {reason}")


# With pytest-xdist (`-n N --dist loadgroup`, as CI runs the tests) the tests of one
# xdist_group run on one worker, one after another. Groups given here:
# - "slurm": every test marked `slurm`. They share the single-node cluster's queue and
#   its two GPUs (a test counts on the third job waiting; another takes the node down).
# - a module's own name: its tests that use a module-scoped fixture of that module (a
#   sweep made once and read by several tests), so the fixture is made once, not once on
#   each worker.
# A test marked xdist_group itself keeps its own group.
#
# Under xdist the work is also handed out heaviest first: a long test or group started
# last is the run's tail while the other workers idle. Each unit of work (a group, or a
# test of none) is weighed by its tests' wall times in a recorded run (`DURATIONS`), or
# for a test not in it by its marks (`_weight`), and the items are sorted by their
# unit's weight, heaviest first, stably; `pytest_configure` turns off xdist's own
# reorder (units by test count), which would undo it. Not without xdist: there the
# order stays the files'.
@pytest.hookimpl(tryfirst=True)   # before xdist's hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = xdist_group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        items[:] = heaviest_first(items)


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", "no") == "loadgroup":
        config.option.loadscopereorder = False     # keep the order sorted above


def heaviest_first(items: list[Any]) -> list[Any]:
    """`items` ordered by the summed `_weight` of their unit of work, heaviest first; the
    order of the files within a weight, and of a unit's own tests, is kept.

    Units that start containers or jobs and units that run on this machine alone are
    handed out in turns, whichever has had less weight so far: a container's first start
    of an image reads its files from disk (TensorFlow's: ~8 s of waiting when the page
    cache lost them), and when all four workers began with such units the CPUs stood
    idle for minutes (measured: 40-80 % idle for the suite's first 3 minutes). In CI,
    where the cluster is said set up apart from the images (`SLURM_READY`), the Slurm
    group comes first, its tests on the cluster alone before the rest: one after another
    on one worker they take minutes, and they wait for the cluster only. A unit on an
    engine handed out before CI has set it up waits in its setup (`wait_for_engines`),
    holding its worker: where CI says its images are still to build (`IMAGES_PENDING`,
    minutes on a just-booted machine) every unit that runs here alone comes first, so no
    worker waits while one is left (in turns, each worker soon held one unit that waited:
    on a just-booted 2-core machine under 10 workers, 3 % of the tests had run when the
    images were built at 669 s, and the run took 1,349 s)."""
    units: dict[str, int] = {}
    engine: set[str] = set()
    cluster: set[str] = set()
    for item in items:
        unit = _unit_of(item)
        units[unit] = units.get(unit, 0) + _weight(item)
        if needs_of(item):
            engine.add(unit)
        if _on_cluster_alone(item):
            cluster.add(unit)
    ranked = sorted(units, key=lambda u: -units[u])      # stable: the files' order
    place = {u: k for k, u in enumerate(u for u in ranked if u in cluster)}
    lanes = [[u for u in ranked if u in engine - cluster], [u for u in ranked if u not in engine]]
    taken = [0, 0]
    here_first = bool(os.environ.get(IMAGES_PENDING))
    while lanes[0] or lanes[1]:
        lane = (0 if not lanes[1] else 1 if not lanes[0] or here_first else
                min((0, 1), key=lambda k: (taken[k], -units[lanes[k][0]])))
        unit = lanes[lane].pop(0)
        taken[lane] += units[unit]
        place[unit] = len(place)
    return sorted(items, key=lambda item: (place[_unit_of(item)], not _on_cluster_alone(item)))


ENGINE_MARKS = {"docker", "podman", "slurm"}


def needs_of(item: pytest.Item) -> set[str]:
    """The engines and the cluster a test runs on, by its marks."""
    return {m.name for m in item.iter_markers()} & ENGINE_MARKS


def _on_cluster_alone(item: pytest.Item) -> bool:
    """A test on the Slurm cluster alone, in CI where its setup is said apart from the
    images' (`SLURM_READY`): the cluster is up in seconds, the images take minutes."""
    return bool(os.environ.get(SLURM_READY)) and needs_of(item) == {"slurm"}


def _unit_of(item: pytest.Item) -> str:
    """What xdist's loadgroup hands to one worker together: the group, else the test."""
    mark = item.get_closest_marker("xdist_group")
    return f"@{mark.args[0] if mark.args else mark.kwargs.get('name')}" if mark else item.nodeid


def _weight(item: pytest.Item) -> int:
    """A test's cost in seconds: its wall time in the run `DURATIONS` recorded, else a
    rough one by its marks: a `slow` test takes tens of seconds (20 unless its mark says
    `slow(seconds=N)`), one on an engine or a cluster starts containers or jobs
    (seconds), a plain one mostly well under one."""
    if item.nodeid in DURATIONS:
        return max(1, int(DURATIONS[item.nodeid]))
    slow = item.get_closest_marker("slow")
    return (1 + (int(slow.kwargs.get("seconds", SLOW_S)) if slow is not None else 0)
            + 4 * bool(needs_of(item)))


SLOW_S = 20     # what a `slow` test weighs unless it says
# Each test's wall time (2 s or more) in a run of the suite under `-n 6`, written by
# `python3 tools/cpu_per_test.py RUN.jsonl --weights tests/durations.json` (the tool's
# docstring says how to record one). Only the order of the hand-out reads it; a copy of
# this conftest alone (tests that run pytest on one) weighs by the marks.
_RECORDED = Path(__file__).parent / "durations.json"
DURATIONS: dict[str, float] = (json.loads(_RECORDED.read_text(encoding="utf-8"))
                               if _RECORDED.is_file() else {})


def xdist_group_of(item: pytest.Item) -> str | None:
    """The xdist_group this conftest marks `item` with (see above); None for none."""
    if item.get_closest_marker("xdist_group") is not None:
        return None
    if item.get_closest_marker("slurm") is not None:
        return "slurm"
    info = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::", 1)[0]
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in (info.name2fixturedefs.get(name, ()) if info else ()):
            if fixturedef.scope == "module" and fixturedef.baseid == module:
                return module
    return None


# CI (`.ci/run`) starts the tests while the engines' images build: it names a file here
# that it writes once every engine, image and the cluster are set up ("ok"), or not
# ("failed: ..."), and a second that it writes once the cluster alone is up. A test
# that needs them waits for its file in its setup, while the workers' other tests run.
ENGINES_READY = "HARNESS_CI_ENGINES_READY"
SLURM_READY = "HARNESS_CI_SLURM_READY"     # the same, written once the cluster alone is up
IMAGES_PENDING = "HARNESS_CI_IMAGES_PENDING"   # "1": the images are to build (minutes)
ENGINES_WAIT_S = 3600.0


def wait_for_engines(item: pytest.Item) -> None:
    """Where CI names its ready file, wait for it before a test on an engine or a
    cluster; fail the test, saying why, where the setup failed or never ended."""
    ready = os.environ.get(SLURM_READY if _on_cluster_alone(item) else ENGINES_READY)
    if not ready or not needs_of(item):
        return
    import time

    path, until = Path(ready), time.monotonic() + ENGINES_WAIT_S
    while not path.exists() or not (said := path.read_text(encoding="utf-8").strip()):
        if time.monotonic() > until:
            pytest.fail(f"{item.nodeid}: CI's engines were not set up after "
                        f"{ENGINES_WAIT_S:.0f} s ({ENGINES_READY})", pytrace=False)
        time.sleep(1.0)
    if said != "ok":
        pytest.fail(f"{item.nodeid}: CI's engine setup {said} (its lines are above)",
                    pytrace=False)


def pytest_runtest_setup(item: pytest.Item) -> None:
    wait_for_engines(item)
    if item.get_closest_marker("docker") is not None:
        reason = docker_unavailable_reason()
        if reason is not None:
            _engine_missing(item, reason)
    if item.get_closest_marker("podman") is not None:
        reason = podman_unavailable_reason()
        if reason is not None:
            _podman_missing(item, reason)
    if item.get_closest_marker("slurm") is not None:
        reason = slurm_unavailable_reason()
        if reason is not None:
            if os.environ.get(REQUIRE_SLURM) == "1":
                pytest.fail(f"{item.nodeid} needs Slurm and {REQUIRE_SLURM}=1, but: {reason}"
                            "\n  fix: bash images/setup-slurm.sh", pytrace=False)
            pytest.skip(f"no Slurm: {reason}")
    if item.get_closest_marker("gpu") is not None and not gpu_present():
        pytest.skip(f"no NVIDIA GPU ({NVIDIA_GPUS} is empty or missing)")


class DockerForbidden(RuntimeError):
    """An unmarked test reached for a Docker engine."""


@pytest.fixture(autouse=True)
def _no_docker_unless_marked(request: pytest.FixtureRequest,
                             monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if any(request.node.get_closest_marker(m) is not None for m in ("docker", "podman")):
        yield
        return
    try:
        import docker
    except ImportError:  # nothing to guard
        yield
        return
    nodeid = request.node.nodeid

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise DockerForbidden(f"{nodeid} touched Docker but is not marked "
                              "@pytest.mark.docker; use FakeRuntime or mark it")

    class GuardedClient(docker.DockerClient):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            refuse()

        @classmethod
        def from_env(cls, *args: Any, **kwargs: Any) -> Any:
            return refuse()

    monkeypatch.setattr(docker, "from_env", refuse)
    monkeypatch.setattr(docker, "DockerClient", GuardedClient)
    monkeypatch.setattr(docker.client, "from_env", refuse)
    monkeypatch.setattr(docker.client, "DockerClient", GuardedClient)
    yield


@pytest.fixture
def fake_sweep(tmp_path: Path) -> FakeSweep:
    """`sweepkit.swept` in this test's `tmp_path`: `fake_sweep(["v1", "v2"], {"v2":
    Behaviour(leak_per_iter=16384)})` writes the matrix and sweeps it over FakeRuntime."""

    import sweepkit  # here, not above: a copy of this conftest alone must load

    def make(*args: Any, **kwargs: Any) -> sweepkit.Swept:
        return sweepkit.swept(tmp_path, *args, **kwargs)

    return make


# ---------------------------------------------------------------- the repository root
# A test run leaves nothing new at the repository's root (issue 42: an empty `oom` was
# committed there): what `git status` calls untracked at the root after the run, and did
# not before it, fails the run, named.
ROOT = Path(__file__).resolve().parents[1]


def _root_untracked() -> set[str] | None:
    """The root's untracked, not ignored entries (None where git cannot tell)."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "-z", "--untracked-files=normal",
                               "--", "."], cwd=ROOT, capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return {e[3:] for e in done.stdout.split("\0")
            if e.startswith("?? ") and "/" not in e[3:].rstrip("/")}


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):     # the controller, once
        session.config.stash[_ROOT_BEFORE] = _root_untracked()
        compile_sources()
        rewrite_tests(session.config)


def compile_sources() -> None:
    """The checkout's own Python byte-compiled once, before xdist starts the workers.

    Where PYTHONDONTWRITEBYTECODE=1 (this machine kind's environment sets it) no process
    writes a .pyc, so each worker and each of the hundreds of `harness` processes the tests
    start compiled the modules it imported from source again; written here (into the
    ignored __pycache__ folders; up-to-date files are only looked at), they are read."""
    import compileall

    for folder in ("harness", "tests", "benchmarks", "scenarios"):
        compileall.compile_dir(ROOT / folder, quiet=2)


def rewrite_tests(config: pytest.Config) -> None:
    """The test modules' assert-rewritten code cached once, before the workers start, and
    harness's own modules' too.

    pytest caches a rewritten module only where bytecode may be written, so under
    PYTHONDONTWRITEBYTECODE=1 each xdist worker rewrote all of them again: ~5 of its
    ~9 CPU-s of collection. pytest also rewrites every module of a distribution that
    registers a plugin (harness's `pytest11` entry point), so each pytest process, a
    worker or one a test starts, parsed and compiled each harness module it imported
    (~100 for one test file's collection) instead of reading its .pyc. Cached here
    (pytest's own cache files, in the ignored __pycache__ folders), every process reads
    them. This reaches into pytest's private rewrite functions; where a pytest lacks
    them, the processes rewrite as before."""
    try:
        from _pytest.assertion import rewrite
        state = config.stash[rewrite.assertstate_key]
    except (ImportError, AttributeError, KeyError):
        return
    tests = [fn for fn in ROOT.glob("tests/**/*.py")
             if fn.name.startswith("test_") or fn.name == "conftest.py"]
    for fn in sorted([*tests, *ROOT.glob("harness/**/*.py")]):
        pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(fn, pyc, state.trace) is not None:
            continue
        try:
            stat, code = rewrite._rewrite_test(fn, config)
        except SyntaxError:
            continue        # its collection says so
        if rewrite.try_makedirs(pyc.parent):
            rewrite._write_pyc(state, code, stat, pyc)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_ROOT_BEFORE, None)
    if hasattr(session.config, "workerinput") or before is None:
        return
    new = sorted((_root_untracked() or set()) - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"the test run left new files at the repository root: "
                                f"{', '.join(new)} (a test or command wrote into the "
                                "working directory; write under tmp_path)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_ROOT_BEFORE = pytest.StashKey[set[str] | None]()
