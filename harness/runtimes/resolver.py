"""A requirement list resolved as the package index stood at 00:00 UTC of a day.

`resolve` asks uv or pip and caches the answer forever (a past day's index never
changes). The index (uv's or pip's setting) also gives upload times and yanked releases;
an index that does not answer gives None, never a failure.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import threading
from collections.abc import Sequence
from functools import lru_cache
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from harness.errors import EnvironmentUnavailable, HarnessError, InputError
from harness.runtimes import process

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
_HTML = "text/html"


def index_url() -> str | None:
    """The simple index uv and pip resolve against, as they are set up here."""
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        value = os.environ.get(name, "").strip()
        if value:
            return value.split()[0].rstrip("/")
    try:
        # lazy: optional: pip's default index, where pip is importable
        from pip._internal.models.index import PyPI

        return str(PyPI.simple_url).rstrip("/")
    except ImportError:
        return None


def normalize(name: str) -> str:
    """A project name as the simple API spells it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def file_version(filename: str, project: str) -> str | None:
    """The version of a wheel or sdist file name of `project`, or None."""
    stem = re.sub(r"\.(whl|tar\.gz|zip|tar\.bz2|egg)$", "", filename)
    if filename.endswith(".whl"):
        parts = stem.split("-")
        return parts[1] if len(parts) >= 5 and normalize(parts[0]) == project else None
    head, _, version = stem.rpartition("-")
    return version if normalize(head) == project else None


def earliest(files: list[Any], project: str, version: str) -> str | None:
    """The earliest `upload-time` among the files of `version` in a simple JSON page."""
    times = [str(f.get("upload-time")) for f in files
             if isinstance(f, dict) and f.get("upload-time")
             and file_version(str(f.get("filename", "")), project) == version]
    return min(times) if times else None


def yanked_in(files: list[Any], project: str) -> dict[str, str]:
    """{version: reason or ""} of each release whose every file is yanked."""
    seen: dict[str, list[str | None]] = {}
    for f in files:
        if not isinstance(f, dict):
            continue
        version = file_version(str(f.get("filename", "")), project)
        if version is None:
            continue
        flag = f.get("yanked", False)
        seen.setdefault(version, []).append(
            None if flag is False or flag is None else "" if flag is True else str(flag))
    return {v: next((r for r in reasons if r), "") for v, reasons in seen.items()
            if reasons and all(r is not None for r in reasons)}


def yanked_words(version: str, reason: str) -> str:
    """"6.5.0 (yanked: reason)", the way every answer says a yanked release."""
    return f"{version} (yanked: {reason or 'no reason given'})"


class _Anchors(HTMLParser):
    """A PEP 503 HTML page's files: `filename`, `href`, and `yanked` from `data-yanked`."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[dict[str, object]] = []
        self._open: dict[str, object] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            yanked: object = False
            if "data-yanked" in found:
                yanked = unescape(found["data-yanked"] or "") or True
            self._open = {"filename": "", "yanked": yanked, "href": found.get("href") or ""}

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["filename"] = str(self._open["filename"]) + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self._open["filename"] = str(self._open["filename"]).strip()
            self.files.append(self._open)
            self._open = None


def html_files(text: str) -> list[dict[str, object]]:
    """The file list of a PEP 503 HTML simple page (no upload times there)."""
    parser = _Anchors()
    parser.feed(text)
    return parser.files


@lru_cache(maxsize=256)
def _files(project: str) -> tuple[Any, ...] | None:
    """The files of a project's simple page (JSON, else HTML); None: no index answers."""
    base = index_url()
    if base is None or not base.startswith(("http://", "https://")):
        return None
    # lazy: requests only where the network is asked
    import requests

    try:
        got = requests.get(f"{base}/{project}/", timeout=20,
                           headers={"Accept": f"{SIMPLE_JSON}, {_HTML};q=0.1"})
        kind = got.headers.get("Content-Type", "")
        if got.status_code != 200:
            return None
        if kind.startswith(SIMPLE_JSON):
            files = got.json().get("files")
            return tuple(files) if isinstance(files, list) else None
        if kind.startswith(_HTML):
            return tuple(html_files(got.text))
    except (requests.RequestException, ValueError, AttributeError):
        return None
    return None


def upload_time(name: str, version: str) -> str | None:
    """When `name==version` was first uploaded (ISO 8601, UTC), or None if unknown."""
    project = normalize(name)
    files = _files(project)
    return earliest(list(files), project, version) if files is not None else None


def yanked_releases(name: str) -> dict[str, str]:
    """{version: reason} of the project's releases marked yanked now; empty: no answer."""
    project = normalize(name)
    files = _files(project)
    return yanked_in(list(files), project) if files is not None else {}


# HARNESS_VENV_TOOL=pip builds venvs with pip even where uv is installed (to compare).
TOOL_ENV = "HARNESS_VENV_TOOL"
_NOTHING = ("no solution found", "no matching distribution", "no version",
            "not found in the")
_NETWORK = ("error sending request", "failed to fetch", "connect", "dns error",
            "timed out", "network", "request failed", "max retries", "could not fetch url")


class ResolveError(HarnessError):
    """A dated requirement list could not be resolved."""


class TooEarly(ResolveError, InputError):
    """Nothing on the index matched the requirements as of that day."""


class Unreachable(ResolveError, EnvironmentUnavailable):
    """The index did not answer."""


def uv_bin() -> str | None:
    """The uv binary (the `uv` package's, else PATH's); None: none, or pip is asked."""
    if os.environ.get(TOOL_ENV, "").lower() == "pip":
        return None
    with _FIND_LOCK:    # uv's finder reads sysconfig, whose first read is not thread-safe
        return _find_uv()


_FIND_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _find_uv() -> str | None:
    try:
        # lazy: optional: the uv package's own binary, where it is installed
        import uv  # type: ignore[import-not-found,unused-ignore]

        found = str(uv.find_uv_bin())
        if os.access(found, os.X_OK):
            return found
    except (ImportError, FileNotFoundError):
        pass
    return shutil.which("uv")


def cutoff(day: str) -> str:
    """The instant a day's resolution stops at: its 00:00 UTC."""
    return f"{day}T00:00:00Z"


def flags(day: str, tool: str = "uv") -> str:
    """The command that reproduces a day's resolution, as a user types it."""
    if tool == "pip":
        return f"pip install --dry-run --uploaded-prior-to {cutoff(day)}"
    return f"uv pip compile --exclude-newer {cutoff(day)}"


def cache_file(cache: Path, reqs: Sequence[str], day: str, version: str) -> Path:
    key = hashlib.sha256("\n".join([version.strip(), day, *sorted(reqs)]).encode()
                         ).hexdigest()[:20]
    return cache / "resolutions" / f"{key}.json"


def _record(cache: Path, reqs: Sequence[str], day: str, version: str) -> dict[str, object]:
    try:
        data = json.loads(cache_file(cache, reqs, day, version).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cached(cache: Path, reqs: Sequence[str], day: str, version: str) -> tuple[str, ...] | None:
    """The pins of an earlier resolution of these requirements on that day, or None."""
    pins = _record(cache, reqs, day, version).get("pins")
    if isinstance(pins, list) and all(isinstance(p, str) for p in pins):
        return tuple(pins)
    return None


def notes(cache: Path, reqs: Sequence[str], day: str, version: str) -> dict[str, str]:
    """What a cell keeps of its day's resolution: `resolved_with` and `yanked`."""
    data = _record(cache, reqs, day, version)
    out = {"resolved_with": str(data.get("resolved_with") or flags(day))}
    yanked = data.get("yanked")
    if isinstance(yanked, list) and yanked:
        out["yanked"] = "; ".join(map(str, yanked))
    return out


def yanked_pins(reqs: Sequence[str], pins: Sequence[str]) -> list[str]:
    """The pins of exact `==` requirements that name a yanked release, in words."""
    exact = {normal(r.split("==", 1)[0].split("[", 1)[0].strip())
             for r in reqs if "==" in r and "*" not in r}
    out = []
    for pin in pins:
        name, _, version = pin.partition("==")
        name = normal(name.strip())
        if name in exact and version:
            reason = yanked_releases(name).get(version.strip())
            if reason is not None:
                out.append(f"{name} {yanked_words(version.strip(), reason)}")
    return out


def resolve(reqs: Sequence[str], day: str, python: str, version: str, cache: Path,
            label: str) -> tuple[str, ...]:
    """The pins `reqs` resolve to as of `day` (`YYYY-MM-DD`, not after today) for `python`.

    Args:
        python, version: The venv's interpreter (its markers count); its `sys.version`.
        cache, label: harness's cache directory; the dated image's label, for errors.

    Raises: TooEarly: nothing of a requirement uploaded by that day; Unreachable: the index
    did not answer, or uv is not installed.
    """
    got = cached(cache, reqs, day, version)
    if got is not None:
        return got
    uv = uv_bin()
    pins = _by_uv(uv, reqs, day, python, label) if uv else _by_pip(reqs, day, python, label)
    yanked = yanked_pins(reqs, pins)
    if not pins:
        raise Unreachable(f"{label}: {' '.join(reqs)} resolved as of {day} to nothing\n"
                          "  fix: check the requirement list")
    path = cache_file(cache, reqs, day, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"requirements": sorted(reqs), "day": day, "python": version,
                               "pins": list(pins),
                               "resolved_with": flags(day, "uv" if uv else "pip"),
                               "yanked": yanked}, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return pins


def _by_uv(uv: str, reqs: Sequence[str], day: str, python: str, label: str
           ) -> tuple[str, ...]:
    rc, out = process.check_output(
        [uv, "pip", "compile", "-q", "--no-header", "--no-annotate", "--python", python,
         "--exclude-newer", cutoff(day), "-"], timeout=300, stdin="\n".join(reqs) + "\n")
    if rc != 0:
        raise _failure(out, reqs, day, label)
    return tuple(sorted(t.strip() for t in out.splitlines()
                        if t.strip() and not t.lstrip().startswith("#") and "==" in t))


def _by_pip(reqs: Sequence[str], day: str, python: str, label: str) -> tuple[str, ...]:
    """pip's `--uploaded-prior-to`; `--isolated`, as an index without upload times would
    pass for any day's."""
    rc, out = process.check_output(
        [python, "-m", "pip", "install", "--isolated", "--dry-run", "--quiet",
         "--ignore-installed", "--disable-pip-version-check", "--report", "-",
         "--uploaded-prior-to", cutoff(day), *reqs], timeout=300)
    if rc != 0 and "no such option: --uploaded-prior-to" in out:
        raise Unreachable(f"{label}: `as_of:` resolves with uv (not installed) or pip's "
                          f"--uploaded-prior-to, which the pip of {python} lacks\n"
                          "  fix: pip install uv (a dependency of harness), or upgrade that "
                          f"pip ({python} -m pip install -U pip); unset {TOOL_ENV} to use uv")
    if rc != 0:
        raise _failure(out, reqs, day, label)
    try:
        report = json.loads(out[out.index("{"):])
        return tuple(sorted(
            f"{normal(i['metadata']['name'])}=={i['metadata']['version']}"
            for i in report["install"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise Unreachable(f"{label}: pip's report of {' '.join(reqs)} as of {day} cannot "
                          f"be read: {out.strip()[-300:]}\n  fix: pip install uv") from exc


def normal(name: str) -> str:
    """A project name as uv pins it (PEP 503): `typing_extensions` -> `typing-extensions`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _failure(out: str, reqs: Sequence[str], day: str, label: str) -> ResolveError:
    lines = [t.strip() for t in out.splitlines() if t.strip()]
    said = next((t for t in reversed(lines) if t.startswith("cause:")),
                lines[-1] if lines else "no output")
    text = out.lower()
    if any(k in text for k in _NETWORK):     # pip says "no matching distribution" too
        return Unreachable(f"{label}: the package index could not be reached to resolve "
                           f"{' '.join(reqs)} as of {day}: {said.removeprefix('cause:').strip()}"
                           "\n  fix: check the network and uv's index setting "
                           "(UV_DEFAULT_INDEX / UV_INDEX_URL); resolutions already made "
                           "are cached and need no index")
    if any(k in text for k in _NOTHING):
        hint = next((t for t in lines if "latest version" in t or "published at" in t), "")
        return TooEarly(f"{label}: {' '.join(reqs)} cannot be resolved as of {day} "
                        f"(00:00 UTC): {said.removeprefix('cause:').strip()}"
                        + (f"\n  {hint.removeprefix('hint:').strip()}" if hint else "")
                        + "\n  fix: start `as_of:` on a day after the packages were "
                        "published, or loosen the requirements")
    return Unreachable(f"{label}: uv could not resolve {' '.join(reqs)} as of {day}: "
                       f"{said}\n  fix: run `uv pip compile --exclude-newer {cutoff(day)}` "
                       "by hand to see why")
