"""One cell's container (`runtimes.docker.run_container`) through
`DockerRuntime.run`, against a fake engine client: no engine is touched."""

from __future__ import annotations

import io
import tarfile
import textwrap
import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests.exceptions

from harness import matrixfile
from harness.runtimes import docker as docker_mod
from harness.runtimes.base import LABEL, ImageInfo, RunRequest
from harness.runtimes.docker import OWNER, DockerRuntime, kill


class FakeContainer:
    def __init__(self, engine: FakeEngine, kwargs: dict[str, Any]) -> None:
        self.engine, self.kwargs = engine, kwargs
        self.id = f"c{len(engine.created)}"
        self.archives: list[bytes] = []

    def start(self) -> None:
        memlock = any(u["Name"] == "memlock" for u in self.kwargs["ulimits"])
        if memlock and self.engine.refuse_memlock:
            raise docker.errors.APIError("error setting rlimit type 8: operation not permitted")
        self.engine.started.append(self.id)

    def put_archive(self, path: str, data: bytes) -> None:
        self.archives.append(data)

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, body in (("out/samples.jsonl", b"{}\n"), ("out/../evil", b"x"),
                               ("out/sub/deep", b"y")):
                info = tarfile.TarInfo(name)
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
        return [buf.getvalue()], {}

    def kill(self) -> None:
        self.engine.killed.append(self.id)

    def logs(self, tail: int) -> bytes:
        return b"agent says hi\n"

    def stats(self, stream: bool, decode: bool) -> list[dict[str, Any]]:
        self.engine.stats_asked.append(self.id)
        return [{"memory_stats": {"usage": 5 << 20, "max_usage": 6 << 20}}]


class FakeEngine:
    """What `run_container` calls of docker-py's client."""

    def __init__(self, refuse_memlock: bool = False, lose: bool = False) -> None:
        self.refuse_memlock, self.lose = refuse_memlock, lose
        self.created: list[FakeContainer] = []
        self.started: list[str] = []
        self.killed: list[str] = []
        self.removed: list[str] = []
        self.stats_asked: list[str] = []   # containers whose stats stream was opened
        self.containers = self
        self.api = self

    def create(self, ref: str, **kwargs: Any) -> FakeContainer:
        container = FakeContainer(self, kwargs)
        self.created.append(container)
        return container

    def inspect_container(self, cid: str) -> dict[str, Any]:
        if self.lose:
            raise requests.exceptions.ConnectionError("connection reset by peer")
        return {"State": {"Running": False, "Status": "exited", "ExitCode": 3,
                          "OOMKilled": False}}

    def remove_container(self, cid: str, force: bool) -> None:
        self.removed.append(cid)

    def info(self) -> dict[str, Any]:
        return {"ID": "fake:engine"}

    def events(self, **kwargs: Any) -> list[dict[str, Any]]:
        """The engine's event log over the asked span: none kept here."""
        return []


def _request(tmp_path: Path) -> RunRequest:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "s.py").write_text("def setup(p):\n    return 0\n\ndef step(s):\n    pass\n")
    (tmp_path / "matrix.yaml").write_text(textwrap.dedent("""\
        name: demo
        runtime: docker
        defaults: {timeout: 10m, mem_limit: 1g}
        matrix:
          image: [python:3.12]
          gpu: [none]
          scenario: [s.py]
        """))
    cell = matrixfile.load(tmp_path / "matrix.yaml").cells[0]
    out = tmp_path / "cells" / cell.id
    out.mkdir(parents=True)
    return RunRequest(cell, ImageInfo(ref=cell.image.ref), out, out / "stop")


def _runtime(engine: FakeEngine, copy_files: bool = False) -> DockerRuntime:
    rt = DockerRuntime(copy_files=copy_files)
    rt._client = engine
    return rt


def test_a_cell_runs_as_one_labelled_container_that_is_removed(tmp_path: Path) -> None:
    engine = FakeEngine()
    req = _request(tmp_path)
    outcome = _runtime(engine).run(req, lambda text: None)
    assert (outcome.exit_code, outcome.oom_killed, outcome.error) == (3, False, None)
    assert outcome.mem_limit_bytes == 1 << 30 and outcome.log_tail == "agent says hi\n"
    assert (req.outdir / "agent.log").read_text() == "agent says hi\n"
    [container] = engine.created
    kw = container.kwargs
    assert kw["labels"][LABEL] == "1" and kw["labels"]["harness.owner"] == OWNER
    assert kw["labels"]["harness.cell"] == req.cell.id
    assert kw["network_mode"] == "none" and kw["memswap_limit"] == 1 << 30
    assert kw["volumes"][str(req.outdir.resolve())] == {"bind": "/harness/out", "mode": "rw"}
    assert [u["Name"] for u in kw["ulimits"]] == ["memlock", "stack"]
    assert "device_requests" not in kw
    assert engine.started == ["c0"] and engine.removed == ["c0"]
    # dockerd's stats stream samples the container's cgroup (1 Hz), on a thread of its own
    deadline = time.monotonic() + 30
    while not engine.stats_asked and time.monotonic() < deadline:
        time.sleep(0.001)
    assert engine.stats_asked == ["c0"]


def test_an_engine_refusing_memlock_runs_with_its_default_and_is_remembered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    engine = FakeEngine(refuse_memlock=True)
    said: list[str] = []
    rt = _runtime(engine)
    outcome = rt.run(_request(tmp_path), said.append)
    assert engine.started == ["c1"] and engine.removed == ["c0", "c1"]
    assert [u["Name"] for u in engine.created[1].kwargs["ulimits"]] == ["stack"]
    assert outcome.details["memlock"].startswith("engine refused -1")
    assert any("memlock" in line for line in said)
    assert (tmp_path / "cache" / "engines" / "fake_engine.memlock-refused").exists()
    fresh = _runtime(FakeEngine())
    fresh.check([])
    assert fresh.memlock_refused


def test_an_engine_lost_mid_run_is_an_outcome_and_reconnects_next_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, restarted = FakeEngine(lose=True), FakeEngine()
    connects: list[str | None] = []

    def connect(base_url: str | None) -> FakeEngine:
        connects.append(base_url)
        return restarted

    monkeypatch.setattr("harness.runtimes.docker.connect", connect)
    rt = _runtime(engine)
    outcome = rt.run(_request(tmp_path), lambda text: None)
    assert outcome.exit_code is None and outcome.error is not None
    assert outcome.error.startswith("engine error: connection reset")
    # The container is removed through a new connection, not the lost one.
    assert connects == [None] and rt._client is restarted
    assert engine.removed == [] and restarted.removed == ["c0"]


def test_a_remote_engine_gets_the_inputs_copied_and_only_plain_out_files_back(
        tmp_path: Path) -> None:
    engine = FakeEngine()
    req = _request(tmp_path)
    _runtime(engine, copy_files=True).run(req, lambda text: None)
    [container] = engine.created
    assert container.kwargs["volumes"] == {}
    with tarfile.open(fileobj=io.BytesIO(container.archives[0])) as tar:
        names = tar.getnames()
    assert "harness/agent/agent.py" in names and "harness/scenario/s.py" in names
    assert sorted(p.name for p in req.outdir.iterdir()) == ["agent.log", "samples.jsonl"]


class WaitingEngine(FakeEngine):
    """An engine whose container runs until the test lets it stop; its wait returns then."""

    def __init__(self) -> None:
        import threading

        super().__init__()
        self.stop = threading.Event()
        self.inspections = 0

    def wait(self, cid: str, timeout: float | None = None) -> dict[str, Any]:
        self.stop.wait(30)
        return {"StatusCode": 3}

    def inspect_container(self, cid: str) -> dict[str, Any]:
        self.inspections += 1
        if not self.stop.is_set():
            return {"State": {"Running": True, "Status": "running"}}
        return super().inspect_container(cid)


def test_the_engine_s_wait_ends_the_run_and_the_state_is_read_once(tmp_path: Path) -> None:
    """Issue 30 item 3: the exit is seen when the engine's wait returns, not at the
    next poll (each a round trip, and up to 0.1 s late); the state is read once, after."""
    import threading

    engine = WaitingEngine()
    threading.Timer(0.5, engine.stop.set).start()
    outcome = _runtime(engine).run(_request(tmp_path), lambda text: None)
    assert (outcome.exit_code, outcome.error) == (3, None)
    assert engine.inspections == 1 and engine.removed == ["c0"]


def test_an_engine_whose_wait_fails_is_polled(tmp_path: Path) -> None:
    # FakeEngine has no wait: the run polls the state as before
    engine = FakeEngine()
    outcome = _runtime(engine).run(_request(tmp_path), lambda text: None)
    assert (outcome.exit_code, outcome.error) == (3, None) and engine.removed == ["c0"]


def test_check_asks_the_engine_for_its_info_once(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's ID for the memlock memory comes from the info check() asked for."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    engine = FakeEngine()
    asked: list[int] = []
    real = engine.info

    def info() -> dict[str, Any]:
        asked.append(1)
        return real()

    monkeypatch.setattr(engine, "info", info)
    _runtime(engine).check([])
    assert len(asked) == 1


class _Exited:
    """A container that exited just before the host's kill: the engine refuses it."""

    def __init__(self, status: int, text: str) -> None:
        self.status, self.text = status, text

    def kill(self) -> None:
        response = requests.models.Response()
        response.status_code = self.status
        raise docker.errors.APIError("kill", response=response, explanation=self.text)


@pytest.mark.parametrize("status, text", [
    (409, "Container 4e80a076 is not running"),                       # Docker
    (500, "can only kill running containers. 4e80a076 is in state exited: container "
          "state improper"),                                           # podman 4.3
])
def test_a_kill_the_engine_refuses_as_the_container_already_exited_is_no_error(
        status: int, text: str) -> None:
    # A 4 s cell whose agent ended it at 3.6 s (a call stuck) as the host's deadline came
    # read `crash` (engine error: 500 ...) on podman in a CI, not `timeout`
    assert kill(_Exited(status, text)) is False
    with pytest.raises(docker.errors.APIError):
        kill(_Exited(500, "engine on fire"))


class SigkilledEngine(FakeEngine):
    """A container that died of SIGKILL (exit 137) with `OOMKilled false`, and the engine's
    event log: with an `oom` event of it, or without."""

    def __init__(self, oom_event: bool) -> None:
        super().__init__()
        self.oom_event = oom_event
        self.asked: list[dict[str, Any]] = []

    def inspect_container(self, cid: str) -> dict[str, Any]:
        return {"State": {"Running": False, "Status": "exited", "ExitCode": 137,
                          "OOMKilled": False, "StartedAt": "2026-11-29T08:25:01.123456789Z",
                          "FinishedAt": "2026-11-29T08:25:09.987654321Z"}}

    def events(self, **kwargs: Any) -> list[dict[str, Any]]:
        self.asked.append(kwargs)
        return ([{"Type": "container", "Action": "oom", "status": "oom"}]
                if self.oom_event else [])


def test_an_oom_kill_the_engine_s_flag_missed_is_read_from_its_event_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dockerd sets OOMKilled from the container's `oom` event, which can reach it after
    it handled the exit: the CI of f1aa496 read a container killed at its memory limit
    with `OOMKilled false`. Its event log still holds the event; a SIGKILL without one
    (a kill from outside) is no OOM, once the wait for a late record has passed."""
    monkeypatch.setattr(docker_mod, "OOM_LATE_S", 0.3)
    monkeypatch.setattr(docker_mod, "OOM_POLL_S", 0.05)
    for has_event in (True, False):
        engine = SigkilledEngine(has_event)
        outcome = _runtime(engine).run(_request(tmp_path / str(has_event)), lambda t: None)
        assert (outcome.exit_code, outcome.oom_killed) == (137, has_event)
        first, *later = engine.asked     # the container's own oom events, over its run
        assert first["filters"] == {"container": "c0", "event": "oom"}
        assert first["since"] < first["until"] and first["until"] - first["since"] <= 12
        assert later == [] if has_event else len(later) >= 2, engine.asked


class LateOomEngine(SigkilledEngine):
    """The record of the OOM kill reaches dockerd after the exit was read: the `oom`
    event (`by="event"`) or the `OOMKilled` flag (`by="flag"`), from the 3rd ask on."""

    def __init__(self, by: str) -> None:
        super().__init__(oom_event=False)
        self.by, self.inspected = by, 0

    def inspect_container(self, cid: str) -> dict[str, Any]:
        self.inspected += 1
        state = super().inspect_container(cid)
        state["State"]["OOMKilled"] = self.by == "flag" and self.inspected >= 3
        return state

    def events(self, **kwargs: Any) -> list[dict[str, Any]]:
        self.oom_event = self.by == "event" and len(self.asked) >= 2
        return super().events(**kwargs)


@pytest.mark.parametrize("by", ["event", "flag"])
def test_an_oom_kill_recorded_after_the_exit_is_an_oom(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by: str) -> None:
    """A CI beside two busy loops read a container killed at its 48m limit as `killed by
    SIGKILL from outside (exit 137, not OOMKilled)`: neither the flag nor the event was
    recorded yet when the exit was read. Both are asked again for a while."""
    monkeypatch.setattr(docker_mod, "OOM_LATE_S", 5.0)
    monkeypatch.setattr(docker_mod, "OOM_POLL_S", 0.01)
    engine = LateOomEngine(by)
    outcome = _runtime(engine).run(_request(tmp_path), lambda t: None)
    assert (outcome.exit_code, outcome.oom_killed) == (137, True)
    assert len(engine.asked) == (3 if by == "event" else 2), engine.asked
    assert all(a["until"] > a["since"] for a in engine.asked)
