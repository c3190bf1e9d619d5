"""Some keys of a JSON object read from the head of its file: results.json keeps its
cells last, so `harness report` and `explain` read its name and meta without parsing
every cell."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import cast

from harness.result.codec import JSON

__all__ = ["load_json_keys"]


_DECODER = json.JSONDecoder()


def _skip(text: str, at: int) -> int:
    """The first position from `at` that is not white space."""
    while at < len(text) and text[at] in " \t\n\r":
        at += 1
    return at


def _value(text: str, at: int) -> tuple[JSON, int]:
    """The JSON value at `at` and where it ends. Raises ValueError: none there whole."""
    found = cast("tuple[JSON, int]", _DECODER.raw_decode(text, at))
    return found


def load_json_keys(path: Path, keys: Collection[str]) -> dict[str, JSON]:
    """Some keys of the JSON object in `path`, read from its start and stopping once they
    are all found: results.json keeps its cells last, so its name and meta are read
    without parsing 1,600 cells. Keys that are not there are left out; a missing or
    broken file gives {}.
    """
    wanted = set(keys)
    found: dict[str, JSON] = {}
    try:
        with path.open(encoding="utf-8") as f:
            text = f.read(1 << 16)
            pos = _skip(text, 0)
            if not text.startswith("{", pos):
                return {}
            pos += 1
            while wanted - found.keys():
                try:        # one `"key": value,` from `pos`; more text where it is cut
                    at = _skip(text, pos)
                    if text.startswith("}", at):
                        break
                    key, at = _value(text, at)
                    at = _skip(text, at)
                    if not text.startswith(":", at):
                        return {}
                    value, at = _value(text, _skip(text, at + 1))
                    at = _skip(text, at)
                    if at >= len(text):     # a number cut at the end may go on
                        raise ValueError("cut")
                except ValueError:
                    more = f.read(max(1 << 16, len(text)))
                    if not more:
                        return {}
                    text += more
                    continue
                if isinstance(key, str) and key in wanted:
                    found[key] = value
                pos = at + 1 if text.startswith(",", at) else at
    except (OSError, UnicodeDecodeError):
        return {}
    return found
