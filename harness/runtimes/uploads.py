"""When a package version's files reached the index: its simple API's JSON (PEP 691 and
PEP 700's `upload-time`), asked by package name only; and which releases the index marks
yanked (PEP 592: the JSON `yanked` key, the HTML page's `data-yanked` attribute, each
true or a reason), which a resolver skips for a range and installs only when pinned
exactly. A release yanked after a day still reads as yanked for that day: the index keeps
no time of the yanking, so a day it was current resolves past it (`days.search` says so).

Which index: uv's setting (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`), else pip's
(`PIP_INDEX_URL`), else pip's own default, read from pip at run time; harness names no
index host of its own. An index that does not answer, or gives no upload times, gives
None: an upload time is a detail of the day search's answer, never a reason to fail it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from html import unescape
from html.parser import HTMLParser
from typing import Any

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
    """{version: reason} of each release whose every file is yanked in a simple page's
    file list (`yanked`: true, or the reason; false or absent: not yanked); "" where
    the index gives no reason. One file of a release yanked and another not: not yanked
    (a resolver can still take that release)."""
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
    """A PEP 503 HTML page's files: each anchor's text as `filename`, its `href`, its
    `data-yanked` attribute as `yanked` (present: true, or its reason)."""

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
    """The files of a project's simple page (JSON, else HTML), or None where the index
    is not set up here or does not answer."""
    base = index_url()
    if base is None or not base.startswith(("http://", "https://")):
        return None
    # lazy: requests (with its charset detector, ~30-70 ms, unless dockerlib hid it) only where the
    # network is asked
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
    """{version: reason} of the project's releases the index marks yanked now; empty
    where it does not answer (a detail of an answer, never a reason to fail it)."""
    project = normalize(name)
    files = _files(project)
    return yanked_in(list(files), project) if files is not None else {}
