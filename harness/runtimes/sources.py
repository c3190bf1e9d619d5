"""A release's code from the package index, for naming the function a package change
changed (`culprit.changes`): one distribution file (`choose`), cached and hash-checked,
read without unpacking. `UV_OFFLINE`/`PIP_NO_INDEX` keep off the network;
`HARNESS_OFFLINE` reads no index.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse
from urllib.request import url2pathname

from harness.runtimes.local import cache_dir
from harness.runtimes.resolver import SIMPLE_JSON, file_version, html_files, index_url, normalize

OFFLINE = ("UV_OFFLINE", "PIP_NO_INDEX")      # the user's settings for no network
MAX_BYTES = 64 << 20          # a distribution larger than this is not fetched
MAX_TEXT = 4 << 20            # a source file larger than this is left out
SDISTS = (".tar.gz", ".tgz", ".tar.bz2", ".zip")
TEXTS = (".py", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".pyx", ".pxd", ".pxi",
         ".rs")
BINARIES = (".so", ".pyd", ".dylib")


class SourcesUnavailable(Exception):
    """A release's files could not be had; the text says why, in one line."""


@dataclass(frozen=True)
class Dist:
    """One file of a release on the index."""

    filename: str
    url: str
    sha256: str | None = None


@dataclass(frozen=True)
class Release:
    """What one distribution file holds: path -> text (sources) or sha256 (binaries)."""

    name: str
    version: str
    filename: str
    files: dict[str, str | bytes]


def offline() -> str | None:
    """Which setting says not to use the network, or None."""
    for name in OFFLINE:
        if os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no"):
            return f"{name} is set"
    return None


def _from_href(page: str, text: str, href: str) -> Dist:
    url, fragment = urldefrag(urljoin(page, href))
    sha = fragment.split("=", 1)[1] if fragment.startswith("sha256=") else None
    name = text or unquote(urlparse(url).path.rsplit("/", 1)[-1])
    return Dist(name, url, sha)


def _linked(page: str, text: str) -> list[Dist]:
    """The files a PEP 503 HTML page links (`resolver.html_files`)."""
    return [_from_href(page, str(f["filename"]), str(f["href"])) for f in html_files(text)]


def index_files(project: str) -> list[Dist]:
    """The files of a project's page on the index (JSON, HTML, or a `file://` folder).

    Raises:
        SourcesUnavailable: no index set up, offline, or the page cannot be read.
    """
    base = index_url()
    if base is None:
        raise SourcesUnavailable("no package index is set up (uv's or pip's)")
    page = f"{base}/{project}/"
    if base.startswith("file:"):
        folder = Path(url2pathname(urlparse(page).path))
        listing = folder / "index.html"
        if listing.is_file():
            return _linked(listing.as_uri(),
                           listing.read_text(encoding="utf-8", errors="replace"))
        if folder.is_dir():
            return [Dist(p.name, p.as_uri()) for p in sorted(folder.iterdir()) if p.is_file()]
        raise SourcesUnavailable(f"the index has no page for {project}")
    if not base.startswith(("http://", "https://")):
        raise SourcesUnavailable(f"the index {base} is neither http(s) nor file")
    why = offline()
    if why is not None:
        raise SourcesUnavailable(f"offline ({why})")
    # lazy: requests only where the network is asked
    import requests

    try:
        got = requests.get(page, timeout=30, headers={"Accept": f"{SIMPLE_JSON}, text/html;q=0.1"})
        if got.status_code != 200:
            raise SourcesUnavailable(f"the index answered {got.status_code} for {project}")
        if got.headers.get("Content-Type", "").startswith(SIMPLE_JSON):
            out = []
            for f in got.json().get("files") or []:
                if isinstance(f, dict) and isinstance(f.get("url"), str):
                    hashes = f.get("hashes")
                    sha = hashes.get("sha256") if isinstance(hashes, dict) else None
                    out.append(Dist(str(f.get("filename")), urljoin(page, f["url"]),
                                    sha if isinstance(sha, str) else None))
            return out
        return _linked(page, got.text)
    except (requests.RequestException, ValueError, AttributeError) as exc:
        raise SourcesUnavailable(f"the index did not answer for {project}: "
                                 f"{type(exc).__name__}") from exc


def _binary_rank(filename: str) -> tuple[int, int, str]:
    """Rank binary wheels: manylinux x86_64, then the newest CPython."""
    tags = filename[:-4].split("-")[-3:]
    cp = max((int(m) for m in re.findall(r"cp3(\d+)", tags[0])), default=0)
    return (0 if "manylinux" in tags[-1] and "x86_64" in tags[-1] else 1, -cp, filename)


def choose(files: list[Dist], project: str, version: str) -> Dist | None:
    """The file of `version` to read: the sdist where there are binary wheels (it holds
    the native sources), else a pure wheel, the sdist, a binary wheel."""
    mine = [f for f in files if file_version(f.filename, project) == version]
    sdists = [f for f in mine if f.filename.endswith(SDISTS)]
    pure = [f for f in mine if f.filename.endswith("-none-any.whl")]
    binary = sorted((f for f in mine if f.filename.endswith(".whl") and f not in pure),
                    key=lambda f: _binary_rank(f.filename))
    if binary and sdists:
        return sdists[0]
    found = pure or sdists or binary
    return found[0] if found else None


def _download(dist: Dist, into: Path) -> Path:
    """The file in the cache, fetched where it is not there yet, its hash checked."""
    key = f"{(dist.sha256 or 'nohash')[:16]}-{dist.filename}"
    path = into / key
    if path.is_file():
        return path
    if dist.url.startswith("file:"):
        data = Path(url2pathname(urlparse(dist.url).path)).read_bytes()
    else:
        # lazy: requests only where the network is asked
        import requests

        try:
            got = requests.get(dist.url, timeout=60, stream=True)
            got.raise_for_status()
            size = int(got.headers.get("Content-Length") or 0)
            if size > MAX_BYTES:
                raise SourcesUnavailable(f"{dist.filename} is {size >> 20} MiB, over "
                                         f"{MAX_BYTES >> 20} MiB")
            data = got.content
        except requests.RequestException as exc:
            raise SourcesUnavailable(f"{dist.filename} could not be downloaded: "
                                     f"{type(exc).__name__}") from exc
    if len(data) > MAX_BYTES:
        raise SourcesUnavailable(f"{dist.filename} is over {MAX_BYTES >> 20} MiB")
    if dist.sha256 and hashlib.sha256(data).hexdigest() != dist.sha256:
        raise SourcesUnavailable(f"{dist.filename}: its hash is not the index's")
    into.mkdir(parents=True, exist_ok=True)
    tmp = into / f".{key}.{os.getpid()}.part"
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def read_archive(data: bytes, filename: str) -> dict[str, str | bytes]:
    """Path within the distribution -> text (sources) or sha256 digest (binaries); an
    sdist's top folder cut, paths that climb out left out.

    Raises:
        SourcesUnavailable: not an archive this can read.
    """
    members: list[tuple[str, bytes]] = []
    try:
        if filename.endswith((".whl", ".zip")):
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                members = [(i.filename, z.read(i)) for i in z.infolist()
                           if not i.is_dir() and _wanted(i.filename, i.file_size)]
        else:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as t:
                for m in t.getmembers():
                    got = t.extractfile(m) if m.isfile() and _wanted(m.name, m.size) else None
                    if got is not None:
                        members.append((m.name, got.read()))
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
        raise SourcesUnavailable(f"{filename} could not be read: {exc}") from exc
    out: dict[str, str | bytes] = {}
    sdist = not filename.endswith(".whl")
    for name, raw in members:
        parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
        if sdist:
            parts = parts[1:]
        if not parts or ".." in parts:
            continue
        path = "/".join(parts)
        out[path] = (raw.decode("utf-8", "replace") if path.endswith(TEXTS)
                     else hashlib.sha256(raw).digest())
    return out


def _wanted(name: str, size: int) -> bool:
    low = name.lower()
    return (low.endswith(TEXTS) and size <= MAX_TEXT) or low.endswith(BINARIES) or (
        ".so." in low)


def release(name: str, version: str) -> Release:
    """`name==version`'s code from the index (`choose`), through the cache.

    Raises:
        SourcesUnavailable: it cannot be had (the text says why, in one line).
    """
    if os.environ.get("HARNESS_OFFLINE", "").strip().lower() not in ("", "0", "false", "no"):
        raise SourcesUnavailable("offline (HARNESS_OFFLINE is set): no index is asked")
    project = normalize(name)
    dist = choose(index_files(project), project, version)
    if dist is None:
        raise SourcesUnavailable(f"the index has no file of {name} {version}")
    try:
        path = _download(dist, cache_dir() / "sources" / project / version)
        return Release(name, version, dist.filename,
                       read_archive(path.read_bytes(), dist.filename))
    except OSError as exc:
        raise SourcesUnavailable(f"{dist.filename}: {type(exc).__name__}: {exc}") from exc
