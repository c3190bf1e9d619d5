"""Images on a Docker engine: what `prepare` gives a cell (`image_info`, pulling the
image when the engine lacks it, with progress by layer), why a pull failed and the fix
(`pull_failure`), `docker build` of a directory with no network, and whether a
registry has a tag, asked without pulling (`pullable`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors
import yaml

from harness.errors import EngineUnavailable, ImageUnavailable
from harness.matrixfile.model import ImageSpec
from harness.runtimes.base import ImageInfo, Progress
from harness.runtimes.dockerengine import ENGINE_ERRORS, engine_text


class PullLayers:
    """Pull progress by layer, from the engine's pull events."""

    def __init__(self) -> None:
        self.layers: dict[str, tuple[str, int, int]] = {}   # id -> (status, done, total)

    def add(self, event: dict[str, Any]) -> None:
        lid, status = event.get("id"), str(event.get("status") or "")
        if not lid or ":" in str(lid) or status.startswith(("Pulling from", "Digest", "Status")):
            return
        detail = event.get("progressDetail") or {}
        _, done, total = self.layers.get(lid, ("", 0, 0))
        if detail.get("total"):
            done, total = int(detail.get("current") or 0), int(detail["total"])
        self.layers[lid] = (status, done, total)

    def summary(self) -> str:
        n = len(self.layers)
        complete = sum(1 for st, _, _ in self.layers.values()
                       if st in ("Pull complete", "Already exists"))
        done = sum(d for st, d, _ in self.layers.values() if st == "Downloading")
        total = sum(t for st, _, t in self.layers.values() if st == "Downloading")
        text = f"{complete}/{n} layers done"
        if total:
            text += f", downloading {done / 1e6:.0f}/{total / 1e6:.0f} MB"
        return text


def pull_failure(ref: str, exc: BaseException) -> str:
    """One line of why `ref` could not be pulled, then the fix that fits this kind of image."""
    said = engine_text(exc)
    low = said.lower()
    if any(k in low for k in ("manifest unknown", "not found", "does not exist", "404")):
        why = f"image {ref} not found in its registry (no such repository or tag)"
    elif any(k in low for k in ("unauthorized", "denied", "authentication")):
        why = f"image {ref}: the registry refused access (login needed?)"
    elif any(k in low for k in ("no such host", "dial tcp", "timeout", "connection refused",
                                "network is unreachable", "temporary failure")):
        why = f"image {ref} is not on the engine and its registry cannot be reached"
    else:
        why = f"image {ref} is not on the engine and could not be pulled"
    text = f"{why} ({said})" if said else why
    recipe = recipe_for(ref)
    if recipe is not None:
        fix = f"build it from its recipe in {RECIPES}: `harness images build {recipe}`"
    else:
        fix = (f"check the tag exists, or `docker pull {ref}` (or `docker login`) on a host "
               "with registry access, then `docker save | docker load` here")
    return f"{text}\n  fix: {fix}"


RECIPES = Path("images/images.yaml")    # `harness images build` reads it from here too


def recipe_for(ref: str, recipes: Path = RECIPES) -> str | None:
    """The name of the offline test image recipe that builds `ref` (`harness images
    build NAME` accepts it), or None: only a recipe's own tag has one."""
    try:
        data = yaml.safe_load(recipes.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    return next((str(name) for name, raw in data.items()
                 if isinstance(raw, dict) and raw.get("tag") == ref), None)


def split_ref(ref: str) -> tuple[str, str]:
    """`repo[:tag]` or `repo@sha256:...` -> (repo, tag or digest) for the pull API, by
    docker-py's own parser (a registry port, `host:5000/x`, is not a tag)."""
    repo, tag = docker.utils.parse_repository_tag(ref)
    return repo, tag or "latest"


def image_info(client: Any, image: ImageSpec, progress: Progress) -> ImageInfo:
    """The image on the engine, pulled first if it is not there.

    Raises:
        ImageUnavailable: it is not on the engine and could not be pulled.
        EngineUnavailable: the engine failed the look-up.
    """
    start = time.monotonic()
    try:
        img = client.images.get(image.ref)
    except docker.errors.ImageNotFound:
        img = pull(client, image.ref, progress)
    except ENGINE_ERRORS as exc:
        raise EngineUnavailable(f"engine error looking up {image.ref}: "
                                f"{engine_text(exc)}") from exc
    digests = img.attrs.get("RepoDigests") or []
    env = tuple((img.attrs.get("Config") or {}).get("Env") or ())
    return ImageInfo(ref=image.ref, digest=digests[0] if digests else img.id,
                     labels=dict(img.labels or {}), python=image.python or "python3",
                     prepare_s=time.monotonic() - start, env=env)


def pull(client: Any, ref: str, progress: Progress) -> Any:
    """Pull `ref`, saying its progress by layer every 2 s; the docker-py image.

    Raises:
        ImageUnavailable: the pull failed (`pull_failure` says why).
    """
    repo, tag = split_ref(ref)
    progress(f"pulling {ref} ...")
    last = 0.0
    layers = PullLayers()
    try:
        for event in client.api.pull(repo, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise docker.errors.APIError(event["error"])
            layers.add(event)
            if time.monotonic() - last > 2:
                last = time.monotonic()
                progress(f"pull {ref}: {layers.summary()}")
        return client.images.get(ref)
    except ENGINE_ERRORS as exc:
        raise ImageUnavailable(pull_failure(ref, exc)) from exc


def build(client: Any, context: Path, tag: str, labels: dict[str, str],
          progress: Progress) -> str:
    """`docker build` of a directory with no network; returns the image id.

    Raises:
        ImageUnavailable: the build failed (its last log lines are in the message).
    """
    tail: list[str] = []
    try:
        for chunk in client.api.build(path=str(context), tag=tag, labels=labels,
                                      network_mode="none", rm=True, decode=True,
                                      forcerm=True):
            text = (chunk.get("stream") or chunk.get("status") or "").rstrip()
            if "error" in chunk:
                raise ImageUnavailable(f"building {tag}: {chunk['error']}\n" +
                                       "\n".join(tail[-10:]))
            if text:
                tail.append(text)
                if text.startswith("Step "):
                    progress(f"{tag}: {text}")
        img = client.images.get(tag)
    except ENGINE_ERRORS as exc:
        raise ImageUnavailable(f"building {tag} failed: {exc}") from exc
    return str(img.id)


def pullable(client: Callable[[], Any], ref: str, timeout_s: float = 30.0) -> str | None:
    """None when the engine's registry has `ref` (its manifest answers: the sweep can
    pull it), else why not, with the fix (`pull_failure`). Nothing is pulled; the
    question is time-boxed, as an unreachable registry can hang the engine's call.
    `client` gives the engine's client when the question is asked (an engine that does
    not answer is a reason too)."""
    if ref.startswith("harness-test/"):     # built here, never in a registry
        return pull_failure(ref, RuntimeError("built locally, not in a registry"))
    found: list[BaseException | None] = []

    def ask() -> None:
        try:
            client().api.inspect_distribution(ref)
            found.append(None)
        except Exception as exc:  # any failure: not pullable, and said
            found.append(exc)

    t = threading.Thread(target=ask, daemon=True, name="registry-check")
    t.start()
    t.join(timeout_s)
    if not found:
        return pull_failure(ref, TimeoutError(f"no answer from its registry in "
                                              f"{timeout_s:.0f} s (timeout)"))
    exc = found[0]
    return None if exc is None else pull_failure(ref, exc)


def image_labels(client: Any, tag: str) -> dict[str, str] | None:
    """The image's labels, or None when the engine does not have it."""
    try:
        return dict(client.images.get(tag).labels or {})
    except docker.errors.ImageNotFound:
        return None


def image_config(client: Any, tag: str) -> dict[str, Any] | None:
    """{"labels": {...}, "env": ["K=V", ...]} of the image, or None when the engine does
    not have it."""
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    config = image.attrs.get("Config") or {}
    return {"labels": dict(image.labels or {}), "env": config.get("Env") or []}
