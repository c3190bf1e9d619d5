"""Connecting to an engine asks its ping, not `/version`, for the API version.

docker-py's `auto` asks `/version`, which podman answers by querying the package manager
for three packages: ~0.35 s of CPU each connect (dpkg-query, seen in a profile of the
suite). The docker CLI reads the `Api-Version` header of `/_ping` instead; so do we."""
from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import docker
import pytest

from harness.runtimes.dockerengine import connect


class _Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    api_version: str | None = "1.41"
    asked: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Engine

    def address_string(self) -> str:
        return "engine"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.asked.append(self.path)
        body = b"OK" if self.path.endswith("/_ping") else json.dumps(
            {"ApiVersion": "1.41", "Version": "fake", "Containers": 0}).encode()
        self.send_response(200)
        if self.server.api_version is not None:
            self.send_header("Api-Version", self.server.api_version)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, _Engine]]:
    real = docker.DockerClient.__mro__[1] if docker.DockerClient.__name__ == "GuardedClient" \
        else docker.DockerClient   # the suite's guard stands for unmarked tests: no engine here
    monkeypatch.setattr(docker, "DockerClient", real)
    sock = tmp_path / "engine.sock"
    server = _Engine(str(sock), _Handler)
    server.asked = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"unix://{sock}", server
    server.shutdown()
    server.server_close()


def test_the_version_comes_from_the_ping(engine: tuple[str, _Engine]) -> None:
    url, server = engine
    client = connect(url)
    assert client.api.api_version == "1.41"
    client.info()
    assert server.asked == ["/_ping", "/v1.41/info"]


def test_a_newer_engine_gets_the_newest_version_we_speak(engine: tuple[str, _Engine]) -> None:
    url, server = engine
    server.api_version = "9.99"
    assert connect(url).api.api_version == docker.constants.DEFAULT_DOCKER_API_VERSION


def test_an_engine_whose_ping_names_no_version_is_asked_its_version(
        engine: tuple[str, _Engine]) -> None:
    url, server = engine
    server.api_version = None
    assert connect(url).api.api_version == "1.41"
    assert "/version" in server.asked


def test_a_podman_sweeps_check_asks_no_info(engine: tuple[str, _Engine], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """podman answers `docker info` by running dpkg-query for three of its tools (~0.27 s
    of CPU a call): a CPU sweep's check asked it only to name the engine where a refused
    memlock is remembered. Its socket's address names it now; docker's info ID still
    names a docker engine."""
    from harness.runtimes.docker import DockerRuntime
    from harness.runtimes.podman import PodmanRuntime

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    url, server = engine
    rt = PodmanRuntime(url)
    rt.check([])
    assert server.asked == ["/_ping"]          # connected (the service answered), no info
    rt.refuse_memlock()
    again = PodmanRuntime(url)
    again.check([])
    assert again.memlock_refused                # remembered for the same socket
    assert PodmanRuntime(url + "-other").engine_key() != rt.engine_key()
    docker_rt = DockerRuntime(url)
    docker_rt.check([])
    assert server.asked[-1] == "/v1.41/info"   # docker: named by its info ID, as before
