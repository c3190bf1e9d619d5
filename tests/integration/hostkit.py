"""Helpers for integration tests that need a Debian service on loopback (sshd, a registry)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest


def required() -> bool:
    """CI (or HARNESS_REQUIRE_DOCKER=1) must run these tests, not skip them."""
    return os.environ.get("CI") == "true" or os.environ.get("HARNESS_REQUIRE_DOCKER") == "1"


def ensure_apt(binary: str, package: str) -> None:
    """Install `package` when `binary` is missing, as root where the tests are required;
    skip otherwise."""
    if os.path.exists(binary):
        return
    if os.geteuid() != 0 or not required() or shutil.which("apt-get") is None:
        pytest.skip(f"{package} is not installed (apt-get install -y {package})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, timeout=300)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", package],
                   env=env, check=True, timeout=300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a service started by a test, killing it if it lingers."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
