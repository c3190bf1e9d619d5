"""Shared helpers of the fault-injection suite: matrices, a sweep subprocess, waits."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.matrixfile.model import abilities

HERE = Path(__file__).parent
SCENARIOS = HERE / "scenarios"
BASE = "harness-test/base:bookworm"
REPO = HERE.parent.parent
# The container engines every container fault runs on (each skipped without its engine,
# unless CI requires it).
ENGINES = [pytest.param("docker", marks=pytest.mark.docker),
           pytest.param("podman", marks=pytest.mark.podman)]


def write_matrix(tmp: Path, scenarios: list[str], *, runtime: str = "docker",
                 defaults: str = "{iterations: 200, warmup: 10, sample_every: 10, timeout: 60s}",
                 image: str | None = None, name: str = "faults", extra: str = "") -> Path:
    """A matrix of one image x CPU x `scenarios` (YAML flow items, paths or mappings)."""
    # The local image gets a fixed name: its label would otherwise follow the name of
    # the interpreter running the tests (python, python3, python3.11).
    img = image or (BASE if abilities(runtime).container_images else
                    f"{{name: python, python: {sys.executable}}}")
    body = "\n".join(f"    - {s}" for s in scenarios)
    m = tmp / "m.yaml"
    m.write_text(f"name: {name}\nruntime: {runtime}\ndefaults: {defaults}\nmatrix:\n"
                 f"  image: [{img}]\n  gpu: [none]\n  scenario:\n{body}\n{extra}")
    return m


def scenario(name: str) -> str:
    return str(SCENARIOS / name)


class Sweep:
    """`python -m harness sweep` as a child in its own session (a terminal's Ctrl-C
    reaches the whole foreground group: `interrupt()` does the same)."""

    def __init__(self, matrix: Path, out: Path, *args: str):
        self.out = out
        self.err_path = out.parent / f"stderr-{time.monotonic_ns()}.txt"
        self.err_file = self.err_path.open("wb")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness", "sweep", str(matrix), "--out", str(out), *args],
            stdout=subprocess.DEVNULL, stderr=self.err_file, stdin=subprocess.DEVNULL,
            cwd=REPO, env=env, start_new_session=True)

    @property
    def stderr(self) -> str:
        if not self.err_file.closed:
            self.err_file.flush()
        return self.err_path.read_text(errors="replace")

    def signal_group(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.proc.wait(10)
            raise AssertionError(f"sweep did not end within {timeout}s:\n{self.stderr}") from None
        finally:
            self.err_file.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.signal_group(signal.SIGKILL)
            self.proc.wait(10)
        self.err_file.close()


def run_sweep(matrix: Path, out: Path, *args: str, timeout: float = 150) -> tuple[int, str]:
    s = Sweep(matrix, out, *args)
    code = s.wait(timeout)
    return code, s.stderr


def wait_for(what: str, pred: Callable[[], Any], timeout: float = 60, every: float = 0.05) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def run_dirs(out: Path, name: str = "faults") -> list[Path]:
    return sorted(p for p in (out / name).glob("*") if p.is_dir())


def cell_running(out: Path, cell: str, name: str = "faults") -> bool:
    """The cell's agent has written samples (so its container/process is up)."""
    return any((d / "cells" / cell / "samples.jsonl").exists() and
               (d / "cells" / cell / "samples.jsonl").stat().st_size > 0
               for d in run_dirs(out, name))


def cell_done(out: Path, cell: str, name: str = "faults") -> bool:
    return any((d / "cells" / cell / "result.json").exists() for d in run_dirs(out, name))


def cells(out: Path, name: str = "faults") -> dict[str, dict[str, Any]]:
    dirs = run_dirs(out, name)
    assert len(dirs) == 1, dirs
    data: dict[str, dict[str, Any]] = json.loads((dirs[0] / "results.json").read_text())["cells"]
    return data


def verdicts(out: Path, name: str = "faults") -> dict[str, str]:
    return {k: v["verdict"] for k, v in cells(out, name).items()}


def temp_files(root: Path) -> list[Path]:
    """Half-written files an atomic writer would leave behind."""
    return [p for p in root.rglob("*") if ".tmp" in p.name]


def managed(*pids: int, runtime: str = "docker") -> list[Any]:
    """Labelled containers owned by these harness processes (other suites may run too),
    on the engine of `runtime` (docker's, or podman's service)."""
    import docker

    from harness.runtimes.base import LABEL
    from harness.runtimes.podman import default_socket

    client = (docker.DockerClient(base_url=default_socket(), version="1.41")  # not /version
              if runtime == "podman"
              else docker.from_env())
    try:
        found: list[Any] = []
        for pid in pids:
            found += client.containers.list(all=True, filters={"label": [
                LABEL, f"harness.host={socket.gethostname()}", f"harness.pid={pid}"]})
        return found
    finally:
        client.close()
