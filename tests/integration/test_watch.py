"""`harness watch` against a real registry: Debian's `docker-registry` (the CNCF
distribution registry) on 127.0.0.1:PORT, images pushed by the engine under test.

The first check finds 23.02-cpu newer than the baseline 23.01-cpu, pulls both (their
local tags are removed after the push, so the runtime must pull), runs the suite and
exits 0; the state then says 23.02-cpu. A pushed 23.03-cpu carries `ENV LEAK=1`, which
makes the scenario keep every buffer: the second check runs only the baseline and
23.03-cpu and exits 1 naming it; a third finds nothing new.

The engine treats 127.0.0.0/8 registries as insecure by default, so plain-HTTP push and
pull work without daemon configuration. Needs the `docker-registry` package (installed
here with apt-get when running as root in CI, i.e. CI=true or HARNESS_REQUIRE_DOCKER=1;
otherwise skipped) and `harness-test/base:bookworm`. Debian's package may start its own
service on :5000; this test neither uses nor stops it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
import requests
from hostkit import ensure_apt, free_port, required, stop

from harness.cli import main
from tests.resultkit import held_ok

pytestmark = [pytest.mark.docker, pytest.mark.slow]     # sweeps per new tag: ~15 s in CI
REGISTRY = "/usr/bin/docker-registry"
BASE = "harness-test/base:bookworm"
REPO_PATH = "harness-test/base"
SCENARIO = '''\
"""Keeps every 16 KiB buffer when the image sets LEAK=1, frees it otherwise."""
import os


def setup(params):
    return {"keep": [], "leak": os.environ.get("LEAK") == "1"}


def step(state):
    buf = bytearray(16384)
    buf[0] = 1
    if state["leak"]:
        state["keep"].append(buf)
'''


@dataclass
class LocalRegistry:
    port: int
    client: Any

    @property
    def repo(self) -> str:
        return f"127.0.0.1:{self.port}/{REPO_PATH}"

    def push(self, image_id: str, tag: str) -> None:
        """Push `image_id` as REPO:tag, then drop the local tag so a check must pull."""
        self.client.images.get(image_id).tag(self.repo, tag)
        for event in self.client.api.push(self.repo, tag=tag, stream=True, decode=True):
            if "error" in event:
                pytest.fail(f"push {self.repo}:{tag}: {event['error']}")
        self.client.images.remove(f"{self.repo}:{tag}")


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    ensure_apt(REGISTRY, "docker-registry")
    client = docker.from_env()
    try:
        client.images.get(BASE)
    except docker.errors.ImageNotFound:
        if required():
            pytest.fail(f"{BASE} is missing: `python -m harness images build base`")
        pytest.skip(f"{BASE} is missing (python -m harness images build base)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem:\n"
                      f"    rootdirectory: {tmp_path / 'storage'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    log = (tmp_path / "registry.log").open("wb")
    proc = subprocess.Popen([REGISTRY, "serve", str(config)], stdout=log,
                            stderr=subprocess.STDOUT)
    reg = LocalRegistry(port, client)
    try:
        deadline = time.monotonic() + 15
        while True:
            if proc.poll() is not None:
                pytest.fail(f"docker-registry exited with {proc.returncode}: "
                            f"{(tmp_path / 'registry.log').read_text()[-2000:]}")
            with contextlib.suppress(requests.exceptions.RequestException):
                if requests.get(f"http://127.0.0.1:{port}/v2/", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"docker-registry did not answer on 127.0.0.1:{port}")
            time.sleep(0.1)
        yield reg
    finally:
        stop(proc)
        log.close()
        # Untag only what this test pushed or pulled: the same image also carries BASE.
        for image in client.images.list(name=reg.repo):
            for ref in image.tags:
                if ref.startswith(f"{reg.repo}:"):
                    with contextlib.suppress(docker.errors.APIError):
                        client.images.remove(ref)
        client.close()


def leaking_image(client: Any) -> str:
    """The base image plus `ENV LEAK=1`, committed without a build or a network."""
    container = client.containers.create(BASE, command=["true"])
    try:
        image = container.commit(changes=["ENV LEAK=1"])
    finally:
        container.remove(force=True)
    return str(image.id)


def test_watch_runs_new_tags_and_flags_the_leaking_one(
        registry: LocalRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    client = registry.client
    base_id = client.images.get(BASE).id
    registry.push(base_id, "23.01-cpu")
    registry.push(base_id, "23.02-cpu")
    (tmp_path / "leak_if_env.py").write_text(SCENARIO)
    suite = tmp_path / "suite.yaml"
    # `min_ratio: 100`: a step-time change under 100x is no change. What this test reads
    # is watch's course and a memory verdict; the A/A tags' time, a 16 KiB bytearray a
    # call (~0.2 us), is the host's: beside two busy loops (a CI of 5b402c5) 23.02-cpu's
    # rounds read 2.22x and 2.02x slower than the same image as 23.01-cpu, their CPU time
    # per step too (memory-bound: a busy host's caches), and it was flagged a regression.
    suite.write_text("name: watched\nruntime: docker\n"
                     "defaults: {iterations: 300, warmup: 20, sample_every: 10, timeout: 60s}\n"
                     "analysis: {min_ratio: 100}\n"
                     "matrix:\n  gpu: [none]\n  scenario: [leak_if_env.py]\n")
    out = tmp_path / "out"
    args = ["watch", registry.repo, "--baseline", "23.01-cpu", "--matrix", str(suite),
            "--out", str(out), "-q"]
    state_file = out / "watched" / "watch-state.json"

    assert main(args) == 0, capsys.readouterr()
    first = capsys.readouterr().out
    assert "new: 23.02-cpu" in first and "no regression in 23.02-cpu" in first
    state = json.loads(state_file.read_text())["repos"][registry.repo]
    assert state["last"] == "23.02-cpu" and state["bad"] == []
    assert client.images.get(f"{registry.repo}:23.02-cpu").id == base_id  # pulled back

    leak_id = leaking_image(client)
    try:
        registry.push(leak_id, "23.03-cpu")
    finally:
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(leak_id)  # tagged nowhere else: only our commit
    assert main(args) == 1
    second = capsys.readouterr().out
    with capsys.disabled():  # shown with -s: the console output of a real check
        print(f"\n{second}")
    assert "new: 23.03-cpu" in second and "last checked 23.02-cpu" in second
    assert "bad new tags vs baseline 23.01-cpu: 23.03-cpu" in second
    state = json.loads(state_file.read_text())["repos"][registry.repo]
    assert state["last"] == "23.03-cpu" and state["bad"] == ["23.03-cpu"]
    results = json.loads((Path(state["results"]) / "results.json").read_text())
    assert sorted(results["cells"]) == ["23.01-cpu.cpu.leak_if_env", "23.03-cpu.cpu.leak_if_env"]
    assert results["cells"]["23.03-cpu.cpu.leak_if_env"]["verdict"] == "leak"
    assert held_ok(results["cells"]["23.01-cpu.cpu.leak_if_env"])
    assert "23.03-cpu" in (Path(state["results"]) / "report.md").read_text()

    # (each call checked once and returned: a watch that went on polling never would)
    assert main(args) == 0
    assert "no new tags after 23.03-cpu" in capsys.readouterr().out
