"""A Docker engine and its images: `connect`, `image_info`, `pull`, `build`, `pullable`,
and `harness culprit`'s hybrids (`hybrid`): a base image with some packages' RECORD files
replaced by another image's, built offline once per recipe.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.constants
import docker.errors
import requests.exceptions
import yaml

from harness.errors import EngineUnavailable, ImageUnavailable
from harness.matrixfile.model import ImageSpec
from harness.runtimes.base import ImageInfo, Progress

ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
NO_ENGINE_FIX = ("start the engine (`dockerd --iptables=false --bridge=none &` on this kind of "
                 "machine, or `systemctl start docker`), check DOCKER_HOST, or use "
                 "`runtime: local` in the matrix")


def enable_ssh() -> None:
    """Give docker-py its ssh:// transport if it was imported without paramiko."""
    client, transport = sys.modules["docker.api.client"], sys.modules["docker.transport"]
    if not hasattr(client, "SSHHTTPAdapter"):
        # lazy: paramiko only where an ssh:// engine is asked for
        from docker.transport.sshconn import SSHHTTPAdapter

        client.SSHHTTPAdapter = SSHHTTPAdapter  # type: ignore[attr-defined]
        transport.SSHHTTPAdapter = SSHHTTPAdapter  # type: ignore[attr-defined]


def where(base_url: str | None) -> str:
    """The engine's address in words, for messages."""
    return base_url or os.environ.get("DOCKER_HOST", "the default socket")


def connect(base_url: str | None) -> Any:
    """A docker-py client that answered a ping at `base_url`: a unix://, tcp:// or ssh:// URL,
    a docker context, or None (DOCKER_HOST, else the default socket).

    Raises: EngineUnavailable: no engine answers there, or no context has that name.
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
        # ssh:// goes through paramiko: the ssh CLI transport is far slower per call.
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
    """A client at the API version the engine's ping names (podman's `/version` is slow)."""
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


# ---------------------------------------------- its images

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
    """The name of the offline image recipe whose tag is `ref`, or None."""
    try:
        data = yaml.safe_load(recipes.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    return next((str(name) for name, raw in data.items()
                 if isinstance(raw, dict) and raw.get("tag") == ref), None)


def split_ref(ref: str) -> tuple[str, str]:
    """`repo[:tag]` or `repo@sha256:...` -> (repo, tag or digest) for the pull API."""
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
    """None when the engine's registry has `ref`, else why not; nothing is pulled, and the
    question is time-boxed (an unreachable registry can hang it)."""
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
    """{"labels": {...}, "env": ["K=V", ...]} of the image; None: not on the engine."""
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    config = image.attrs.get("Config") or {}
    return {"labels": dict(image.labels or {}), "env": config.get("Env") or []}


# ---------------------------------------------- hybrid images for harness culprit

REPO = "harness-culprit"
SWAP = "/harness-swap"

# Run by the images' own interpreters (Python 3.6 and later): stdlib only.
SCRIPT = r'''"""harness culprit: a package's installed files, as its RECORD lists them."""
import csv
import os
import shutil
import sys


def norm(name):
    return name.lower().replace("_", "-").replace(".", "-")


def dists(names):
    want = set(norm(n) for n in names)
    found = {}
    for entry in sys.path:
        if not os.path.isdir(entry or "."):
            continue
        for d in sorted(os.listdir(entry or ".")):
            if d.endswith(".dist-info"):
                key = norm(d[:-len(".dist-info")].partition("-")[0])
                if key in want and key not in found:
                    found[key] = os.path.join(entry, d)
    missing = sorted(want - set(found))
    if missing:
        sys.exit("harness culprit: no *.dist-info (RECORD) for " + ", ".join(missing))
    return found


def files(info):
    base = os.path.dirname(info)
    out = [info]
    record = os.path.join(info, "RECORD")
    if not os.path.isfile(record):
        sys.exit("harness culprit: %s has no RECORD: its files are not known" % info)
    with open(record) as f:
        for row in csv.reader(f):
            if row and row[0]:
                out.append(os.path.normpath(os.path.join(base, row[0])))
    return out


def main(argv):
    what, names = argv[0], argv[1:]
    for info in dists(names).values():
        for path in files(info):
            if what == "remove":
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                elif os.path.lexists(path):
                    os.remove(path)
            elif os.path.lexists(path):
                dest = "%s%s" % (os.environ["SWAP"], path)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.copytree(path, dest, symlinks=True)
                else:
                    if not os.path.isdir(os.path.dirname(dest)):
                        os.makedirs(os.path.dirname(dest))
                    shutil.copy2(path, dest, follow_symlinks=False)


main(sys.argv[1:])
'''


def dockerfile(base: ImageSpec, other: ImageSpec, take: Sequence[str], drop: Sequence[str]
               ) -> str:
    """The recipe: `base` less `drop`'s files, plus `other`'s files of `take`."""
    def py(image: ImageSpec) -> str:
        return image.python or "python3"

    lines = []
    if take:
        lines += [f"FROM {other.ref} AS other", "COPY swap.py /harness-swap.py",
                  f"RUN mkdir -p {SWAP} && SWAP={SWAP} {py(other)} /harness-swap.py collect "
                  + " ".join(take)]
    lines += [f"FROM {base.ref}", "COPY swap.py /harness-swap.py"]
    if drop:
        lines.append(f"RUN {py(base)} /harness-swap.py remove " + " ".join(drop))
    if take:
        lines.append(f"COPY --from=other {SWAP}/ /")
    lines.append("RUN rm -f /harness-swap.py")
    return "\n".join(lines) + "\n"


def tag_of(client: Any, base: ImageSpec, other: ImageSpec, take: Sequence[str],
           drop: Sequence[str]) -> str:
    """`harness-culprit/<base label>:<key of the recipe>`.

    Raises:
        ImageUnavailable: the engine lacks one of the two images.
    """
    ids = []
    for image in (base, other):
        try:
            ids.append(str(client.images.get(image.ref).id))
        except Exception as exc:   # docker's errors, not imported here
            raise ImageUnavailable(f"{image.ref}: not on the engine ({exc}); fix: docker "
                                   f"pull {image.ref}, or run the sweep again") from exc
    recipe = "\n".join([*ids, "take", *sorted(take), "drop", *sorted(drop), SCRIPT])
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9._-]+", "-", base.label.lower()).strip("-.") or "image"
    return f"{REPO}/{name}:{key}"


def hybrid(client: Any, base: ImageSpec, other: ImageSpec, take: Sequence[str],
           drop: Sequence[str], swapped: str, progress: Progress) -> str:
    """The hybrid's tag, built now unless the engine has it already.

    Args:
        take, drop: Packages whose files come from `other`; removed from `base` first.
        swapped: What was swapped, in words, for the image's label.

    Raises: ImageUnavailable: a package has no RECORD, or the build failed.
    """
    tag = tag_of(client, base, other, take, drop)
    if image_labels(client, tag) is not None:
        progress(f"{tag}: cached hybrid ({swapped})")
        return tag
    with tempfile.TemporaryDirectory(prefix="harness-culprit-") as tmp:
        ctx = Path(tmp)
        (ctx / "swap.py").write_text(SCRIPT, encoding="utf-8")
        (ctx / "Dockerfile").write_text(dockerfile(base, other, take, drop), encoding="utf-8")
        progress(f"{tag}: building {base.label} with {swapped}")
        build(client, ctx, tag, {"harness.culprit.base": base.ref,
                                 "harness.culprit.other": other.ref,
                                 "harness.culprit.swapped": swapped}, progress)
    return tag
