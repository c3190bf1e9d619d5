"""When a package version's files reached the index: its simple API's JSON (PEP 691 and
PEP 700's `upload-time`), asked by package name only.

Which index: uv's setting (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`), else pip's
(`PIP_INDEX_URL`), else pip's own default, read from pip at run time; harness names no
index host of its own. An index that does not answer, or gives no upload times, gives
None: an upload time is a detail of the day search's answer, never a reason to fail it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

_JSON = "application/vnd.pypi.simple.v1+json"


def index_url() -> str | None:
    """The simple index uv and pip resolve against, as they are set up here."""
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        value = os.environ.get(name, "").strip()
        if value:
            return value.split()[0].rstrip("/")
    try:
        from pip._internal.models.index import PyPI  # pip's default index, where pip is

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


@lru_cache(maxsize=256)
def upload_time(name: str, version: str) -> str | None:
    """When `name==version` was first uploaded (ISO 8601, UTC), or None if unknown."""
    base = index_url()
    if base is None or not base.startswith(("http://", "https://")):
        return None
    import requests

    project = normalize(name)
    try:
        got = requests.get(f"{base}/{project}/", headers={"Accept": _JSON}, timeout=20)
        if got.status_code != 200 or not got.headers.get("Content-Type", "").startswith(
                _JSON):
            return None
        files = got.json().get("files")
    except (requests.RequestException, ValueError, AttributeError):
        return None
    return earliest(files, project, version) if isinstance(files, list) else None
