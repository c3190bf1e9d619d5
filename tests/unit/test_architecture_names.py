"""ARCHITECTURE.md names only what is there (issue 50): every module, class, function
and path it puts in backticks exists, so a claim about a seam cannot outlive the seam."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = (".py", ".json", ".md", ".yaml", ".yml", ".jsonl", ".toml", ".html", ".xml")


def resolves(dotted: str) -> bool:
    """`a.b.c` is harness.a.b.c: a module, or an attribute of the longest module."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module("harness." + ".".join(parts[:k]))
        except ImportError:
            continue
        for name in parts[k:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_name_in_backticks_exists() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = []
    for name in sorted(set(re.findall(r"`([A-Za-z_][\w./:-]*)`", text))):
        if "/" in name:
            path = name.split(":")[0].rstrip("/")
            if path.split("/")[0] in ("harness", "tests", "benchmarks", "docs", "images",
                                      ".ci") and not (ROOT / path).exists():
                missing.append(name)
            continue
        top = name.split(".")[0]
        if name.endswith(FILES) or "." not in name or not (
                (ROOT / "harness" / top).is_dir() or (ROOT / "harness" / f"{top}.py").is_file()):
            continue
        if not resolves(name):
            missing.append(name)
    assert missing == [], f"ARCHITECTURE.md names what is not there: {missing}"


def test_it_stays_short() -> None:
    words = len((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split())
    assert words <= 2500, f"ARCHITECTURE.md has {words} words; the house rule is 2,500"
