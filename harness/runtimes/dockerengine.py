"""Reaching a Docker engine: the docker-py client for a base URL, a context name or
DOCKER_HOST (`connect`), the errors an engine call raises (`ENGINE_ERRORS`) and the
engine's own words out of them (`engine_text`).

The `docker*` modules of this folder are the only ones that import `docker`: this one
(the engine), `dockerimage` (images), `dockercontainer` (one cell's container) and
`docker` (the runtime that wires them).
"""

from __future__ import annotations

import os
import re
from typing import Any

import docker
import docker.constants
import docker.errors
import requests.exceptions

from harness.errors import EngineUnavailable
from harness.runtimes.dockerlib import enable_ssh

ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
NO_ENGINE_FIX = ("start the engine (`dockerd --iptables=false --bridge=none &` on this kind of "
                 "machine, or `systemctl start docker`), check DOCKER_HOST, or use "
                 "`runtime: local` in the matrix")


def where(base_url: str | None) -> str:
    """The engine's address in words, for messages."""
    return base_url or os.environ.get("DOCKER_HOST", "the default socket")


def connect(base_url: str | None) -> Any:
    """A docker-py client that answered a ping.

    Args:
        base_url: An endpoint URL (unix://, tcp://, ssh://), a docker context name, or
            None for DOCKER_HOST / the default socket.

    Raises:
        EngineUnavailable: no engine answers there, or no context has that name.
    """
    try:
        url = base_url
        if url and "://" not in url:  # a docker context name
            ctx = docker.ContextAPI.get_context(url)
            if ctx is None:
                raise EngineUnavailable(f"no docker context named {url!r}\n  fix: "
                                        "`docker context ls`, or give an endpoint URL")
            url = ctx.Host
        ssh = (url or os.environ.get("DOCKER_HOST") or "").startswith("ssh://")
        if ssh:
            enable_ssh()
        # ssh:// goes through paramiko: the ssh CLI transport costs ~0.8 s per
        # API call (measured on loopback) against ~0.06 s.
        if ssh:
            client = (docker.DockerClient(base_url=url, timeout=120) if url
                      else docker.from_env(timeout=120))
            client.ping()
        else:
            client = _negotiated(url)
    except ENGINE_ERRORS as exc:
        raise EngineUnavailable(f"no Docker engine answers at {where(base_url)}: {exc}\n"
                                f"  fix: {NO_ENGINE_FIX}") from exc
    return client


def _negotiated(url: str | None) -> Any:
    """A client at the API version the engine's ping names (as the docker CLI does),
    not docker-py's `auto`, which asks `/version`: podman answers that by querying its
    package manager for three packages (~0.35 s of CPU a connect on Debian's podman)."""
    def make(version: str) -> Any:
        return (docker.DockerClient(base_url=url, version=version, timeout=120) if url
                else docker.from_env(version=version, timeout=120))
    probe = make(docker.constants.MINIMUM_DOCKER_API_VERSION)
    try:
        answer = probe.api.get(probe.api.base_url + "/_ping", timeout=120)
        answer.raise_for_status()
    finally:
        probe.close()
    said = answer.headers.get("Api-Version", "")
    if not re.fullmatch(r"\d+\.\d+", said):     # an engine that names none: ask it
        client = make("auto")
        client.ping()
        return client
    ours = docker.constants.DEFAULT_DOCKER_API_VERSION
    return make(min(said, ours, key=lambda v: tuple(int(x) for x in v.split("."))))


def engine_text(exc: BaseException) -> str:
    """The engine's own words, without docker-py's 'NNN Client Error for http+docker://...'."""
    text = str(getattr(exc, "explanation", None) or exc).strip()
    text = re.sub(r"^\d{3} \w+ Error for \S+: \w[\w ]*\(\"?(.*?)\"?\)$", r"\1", text)
    text = re.sub(r"\s+", " ", text)
    return text[:200]
