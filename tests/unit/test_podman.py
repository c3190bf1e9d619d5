"""`runtime: podman`'s differences from docker (harness/runtimes/podman.py), against the
fake engine client of test_docker_container: no engine is touched."""

from __future__ import annotations

import resource
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_docker_container import FakeEngine

from harness import matrixfile
from harness.errors import GpuUnavailable
from harness.runtimes import podman
from harness.runtimes.base import ImageInfo, RunRequest
from harness.runtimes.docker import container_kwargs
from harness.runtimes.podman import PodmanRuntime


class PodmanEngine(FakeEngine):
    """Podman 4.3 on cgroup v1: the container's process was OOM-killed, yet its state
    says OOMKilled false."""

    def inspect_container(self, cid: str) -> dict[str, Any]:
        return {"State": {"Running": False, "Status": "exited", "ExitCode": 137,
                          "OOMKilled": False, "Pid": 4242}}


def _request(tmp_path: Path, gpu: str = "none") -> RunRequest:
    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\ndef step(s):\n    pass\n")
    (tmp_path / "matrix.yaml").write_text(textwrap.dedent(f"""\
        name: demo
        runtime: podman
        defaults: {{timeout: 10m, mem_limit: 64m}}
        matrix:
          image: [harness-test/base:bookworm]
          gpu: [{gpu}]
          scenario: [s.py]
        """))
    cell = matrixfile.load(tmp_path / "matrix.yaml").cells[0]
    out = tmp_path / "cells" / cell.id
    out.mkdir(parents=True, exist_ok=True)
    return RunRequest(cell, ImageInfo(ref=cell.image.ref), out, out / "stop")


def _runtime(engine: FakeEngine, monkeypatch: pytest.MonkeyPatch) -> PodmanRuntime:
    monkeypatch.setenv("HARNESS_PODMAN_HOST", "unix:///run/podman/podman.sock")
    rt = PodmanRuntime()
    rt._client = engine
    return rt


def test_the_socket_is_podmans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_PODMAN_HOST", raising=False)
    monkeypatch.setenv("CONTAINER_HOST", "unix:///srv/podman.sock")
    assert PodmanRuntime().base_url == "unix:///srv/podman.sock"
    monkeypatch.setenv("HARNESS_PODMAN_HOST", "unix:///x/p.sock")
    assert PodmanRuntime().base_url == "unix:///x/p.sock"
    assert PodmanRuntime("unix:///given.sock").base_url == "unix:///given.sock"


def test_a_cell_asks_for_the_rlimits_this_process_has(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Podman would raise nofile/nproc to its defaults, which a host without
    CAP_SYS_RESOURCE refuses: the cell gets this process's own (docker's kwargs else)."""
    kw = container_kwargs(_request(tmp_path), _runtime(FakeEngine(), monkeypatch))
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in kw["ulimits"]}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY:
        assert limits["nofile"] == (min(soft, hard) if soft != resource.RLIM_INFINITY
                                    else hard, hard)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert limits["nproc"][1] <= pid_max and limits["nproc"][0] <= limits["nproc"][1]
    assert {"memlock", "stack"} <= set(limits)
    assert kw["network_mode"] == "none" and kw["memswap_limit"] == 64 << 20


def test_a_gpu_is_asked_for_by_its_cdi_name(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    kw = container_kwargs(_request(tmp_path, gpu="1"), _runtime(FakeEngine(), monkeypatch))
    [request] = kw["device_requests"]
    assert request["Driver"] == "cdi" and request["DeviceIDs"] == ["nvidia.com/gpu=1"]


def test_an_oom_kill_and_the_peak_podman_does_not_report_are_read_from_the_cgroup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "memory.oom_control"
    counter.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    (tmp_path / "memory.max_usage_in_bytes").write_text(f"{200 << 20}\n")
    seen: list[int] = []
    monkeypatch.setattr(podman, "cgroup_oom_file", lambda pid: seen.append(pid) or counter)
    outcome = _runtime(PodmanEngine(), monkeypatch).run(_request(tmp_path), lambda t: None)
    assert seen == [4242]
    assert (outcome.exit_code, outcome.oom_killed) == (137, True)
    # the stats stream said 6 MiB at most (podman streams every 5 s): the cgroup's peak
    assert outcome.details["host_max_usage"] == 200 << 20
    counter.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    outcome = _runtime(PodmanEngine(), monkeypatch).run(_request(tmp_path), lambda t: None)
    assert (outcome.exit_code, outcome.oom_killed) == (137, False)   # a kill from outside


def test_a_local_cell_is_sampled_from_its_cgroup_and_podmans_stats_are_not_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Podman's stats stream costs its service CPU for each container (and gives a sample
    every 5 s, without max_usage or rss): the watch of the cgroup samples it instead."""
    cg = tmp_path / "libpod-ab"
    cg.mkdir()
    (cg / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    for name, value in (("usage_in_bytes", 30 << 20), ("max_usage_in_bytes", 40 << 20),
                        ("limit_in_bytes", 64 << 20)):
        (cg / f"memory.{name}").write_text(f"{value}\n")
    (cg / "memory.stat").write_text(f"cache 4096\nrss {20 << 20}\nrss_huge 0\n")
    monkeypatch.setattr(podman, "cgroup_oom_file", lambda pid: cg / "memory.oom_control")
    sampled = threading.Event()
    sample = podman.CgroupWatch._sample

    def sample_once(watch: podman.CgroupWatch) -> None:
        sample(watch)
        sampled.set()

    monkeypatch.setattr(podman.CgroupWatch, "_sample", sample_once)

    class Running(PodmanEngine):
        """Running until the watch took its first sample (as a cell of a second would)."""

        def inspect_container(self, cid: str) -> dict[str, Any]:
            state = super().inspect_container(cid)
            if self.started and not sampled.wait(0.001):
                state["State"].update(Running=True, Status="running")
            return state

    engine = Running()
    outcome = _runtime(engine, monkeypatch).run(_request(tmp_path), lambda t: None)
    assert engine.stats_asked == []
    assert outcome.host_samples, "no sample of the cgroup"
    first = outcome.host_samples[0]
    assert {k: first[k] for k in ("usage", "max_usage", "limit", "rss")} == {
        "usage": 30 << 20, "max_usage": 40 << 20, "limit": 64 << 20, "rss": 20 << 20}
    assert isinstance(first["t"], float) and first["t"] >= 0
    assert outcome.details["host_max_usage"] == 40 << 20


def test_a_cell_over_before_inspect_answers_is_sampled_from_its_cgroup_found_by_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a container whose process had ended when the engine was asked for it (Pid 0:
    # a cell of a third of a second on a busy host), its cgroup still there at its start
    cg = tmp_path / "cg" / "memory" / "libpod_parent" / "libpod-c0"
    cg.mkdir(parents=True)
    (cg / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    (cg / "memory.usage_in_bytes").write_text(f"{30 << 20}\n")
    monkeypatch.setattr(podman, "CGROUP_ROOT", tmp_path / "cg")

    class Over(PodmanEngine):
        def inspect_container(self, cid: str) -> dict[str, Any]:
            state = super().inspect_container(cid)
            state["State"]["Pid"] = 0
            return state

    outcome = _runtime(Over(), monkeypatch).run(_request(tmp_path), lambda t: None)
    # THEN the watch found it by the container's id and sampled it
    assert outcome.host_samples and outcome.host_samples[0]["usage"] == 30 << 20
    assert podman.container_oom_file("c0", tmp_path / "cg") == cg / "memory.oom_control"
    v2 = tmp_path / "cg" / "machine.slice" / "libpod-d1.scope"
    v2.mkdir(parents=True)
    (v2 / "memory.events").write_text("oom 0\noom_kill 0\n")
    assert podman.container_oom_file("d1", tmp_path / "cg") == v2 / "memory.events"
    assert podman.container_oom_file("e2", tmp_path / "cg") is None


def test_a_remote_podman_or_a_cgroup_not_found_keeps_the_stats_stream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podman, "cgroup_oom_file", lambda pid: None)
    engine = PodmanEngine()
    outcome = _runtime(engine, monkeypatch).run(_request(tmp_path), lambda t: None)
    deadline = time.monotonic() + 30
    while not engine.stats_asked and time.monotonic() < deadline:
        time.sleep(0.001)            # the stream is read on a thread of its own
    assert engine.stats_asked == ["c0"] and outcome.exit_code == 137
    remote = PodmanRuntime("ssh://lab/run/podman/podman.sock")
    remote._client = PodmanEngine()
    assert remote.watch_cgroup("c0", time.monotonic()) is None


def test_the_cells_end_is_waited_for_with_podmans_own_wait_which_does_not_spin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Podman 4.3's Docker-compatible wait looks at the container every microsecond
    (a CPU of its service busy while the cell runs): podman's own wait is asked, with a
    condition (without one it spins too) and an interval."""
    monkeypatch.setattr(podman, "cgroup_oom_file", lambda pid: None)

    class Waits(PodmanEngine):
        def __init__(self) -> None:
            super().__init__()
            self.posts: list[tuple[str, dict[str, Any]]] = []
            self.compat_waits = 0

        def wait(self, cid: str, timeout: float | None = None) -> dict[str, Any]:
            self.compat_waits += 1
            return {"StatusCode": 137}

        def _url(self, path: str, *args: str) -> str:
            return "/v1.41" + path.format(*args)

        def _post(self, url: str, params: dict[str, Any], timeout: float | None) -> str:
            self.posts.append((url, params))
            return "response"

        def _raise_for_status(self, res: str) -> None:
            assert res == "response"

    engine = Waits()
    outcome = _runtime(engine, monkeypatch).run(_request(tmp_path), lambda t: None)
    assert outcome.exit_code == 137 and engine.compat_waits == 0
    assert engine.posts == [("/v1.41/libpod/containers/c0/wait",
                             {"condition": ["stopped", "exited"], "interval": "50ms"})]


def test_the_oom_counter_is_found_for_cgroup_v1_and_v2(tmp_path: Path) -> None:
    proc, root = tmp_path / "proc", tmp_path / "cg"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "cgroup").write_text("4:memory:/libpod_parent/libpod-ab\n3:cpu:/x\n0::/\n")
    v1 = root / "memory" / "libpod_parent" / "libpod-ab"
    v1.mkdir(parents=True)
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\noom_kill 2\n")
    assert podman.cgroup_oom_file(7, proc, root) == v1 / "memory.oom_control"
    assert podman.oom_kills(v1 / "memory.oom_control") == 2
    (proc / "8").mkdir()
    (proc / "8" / "cgroup").write_text("0::/machine.slice/libpod-cd.scope\n")
    v2 = root / "machine.slice" / "libpod-cd.scope"
    v2.mkdir(parents=True)
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert podman.cgroup_oom_file(8, proc, root) == v2 / "memory.events"
    assert podman.cgroup_oom_file(9, proc, root) is None       # the process is gone
    assert podman.oom_kills(root / "gone") is None


def test_the_watch_keeps_its_readings_after_the_cgroup_is_gone(tmp_path: Path) -> None:
    counter, current = tmp_path / "memory.events", tmp_path / "memory.current"
    counter.write_text("oom_kill 0\n")
    current.write_text("1000\n")
    watch = podman.CgroupWatch(counter, every_s=0.001)
    current.write_text("5000\n")
    counter.write_text("oom_kill 1\n")
    deadline = time.monotonic() + 30
    while (watch.kills == 0 or watch.peak != 5000) and time.monotonic() < deadline:
        time.sleep(0.001)            # read while the cgroup exists...
    current.write_text("10\n")
    counter.unlink()                 # ...then podman removes the cgroup
    assert watch() == (True, 5000)


def test_the_watch_samples_once_before_its_thread_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a cgroup, and a host so busy that the watch's thread never gets to run
    counter = tmp_path / "memory.oom_control"
    counter.write_text("oom_kill 0\n")
    (tmp_path / "memory.usage_in_bytes").write_text(f"{30 << 20}\n")
    monkeypatch.setattr(threading.Thread, "start", lambda self: None)
    monkeypatch.setattr(threading.Thread, "join", lambda self, timeout=None: None)
    watch = podman.CgroupWatch(counter)
    # THEN the cell has its first sample all the same (a CI's cell of a second had none)
    assert [s["usage"] for s in watch.samples] == [30 << 20]
    assert watch() == (False, None)


def test_gpu_cells_need_a_cdi_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    none = (tmp_path / "etc-cdi", tmp_path / "run-cdi")
    [(level, what, fix)] = podman.setup_checks(True, none)
    assert level == "FAIL" and "no CDI spec for nvidia.com/gpu" in what
    assert "nvidia-ctk cdi generate" in fix
    assert podman.setup_checks(False, none) == []
    none[0].mkdir()
    (none[0] / "other.yaml").write_text('kind: "vendor.com/fpga"\n')
    (none[0] / "nvidia.yaml").write_text('cdiVersion: 0.5.0\nkind: "nvidia.com/gpu"\n')
    [(level, what, _)] = podman.setup_checks(True, none)
    assert level == "ok" and what.endswith("nvidia.yaml")
    # the sweep stops before any cell (exit 3) where the spec is missing
    monkeypatch.setattr(podman, "CDI_DIRS", none[1:])
    monkeypatch.setattr(podman, "cdi_specs", lambda dirs=none[1:]: [])
    rt = _runtime(FakeEngine(), monkeypatch)
    with pytest.raises(GpuUnavailable, match="no CDI spec"):
        rt.check([_request(tmp_path, gpu="0").cell])


def test_no_service_says_how_to_start_it_and_no_podman_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.errors import EngineUnavailable

    def refuse(url: str | None) -> Any:
        raise EngineUnavailable(f"no Docker engine answers at {url}: refused\n  fix: dockerd")

    monkeypatch.setattr(podman, "connect", refuse)
    rt = PodmanRuntime("unix:///run/podman/podman.sock")
    monkeypatch.setattr(podman.shutil, "which", lambda name: "/usr/bin/podman")
    with pytest.raises(EngineUnavailable) as info:
        rt.client  # noqa: B018
    said = str(info.value)
    assert said.startswith("no podman service answers at unix:///run/podman/podman.sock")
    assert "podman system service --time=0 unix:///run/podman/podman.sock &" in said
    assert "dockerd" not in said
    monkeypatch.setattr(podman.shutil, "which", lambda name: None)
    with pytest.raises(EngineUnavailable, match="podman is not installed") as info:
        rt.client  # noqa: B018
    assert "apt-get install podman" in str(info.value)
