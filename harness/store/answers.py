"""The answers commands store beside a run's cells, read back only here (the gate's
other half): `harness explain`'s cells/<id>/where.json, `harness culprit`'s
culprit/<row>/culprit.json and `harness day`'s day/<row>/day.json, each as parsed JSON
(`answers.explained` and `answers.culprits` make them typed and check what they rest on;
`culprit.run.ends` reads day.json for the days culprit searches between)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from harness.result.codec import JSON
from harness.store.results import load_json

WHERE_FILE = "where.json"
CULPRIT_DIR = "culprit"
CULPRIT_FILE = "culprit.json"
DAY_DIR = "day"
DAY_FILE = "day.json"


def where_records(root: Path) -> list[JSON]:
    """Every cells/<id>/where.json of a run, parsed (None for one that does not parse)."""
    return [load_json(path) for path in sorted(root.glob(f"cells/*/{WHERE_FILE}"))]


def culprit_records(root: Path) -> list[JSON]:
    """Every culprit/<row>/culprit.json of a run, parsed (None for one that does not)."""
    base = root / CULPRIT_DIR
    if not base.is_dir():
        return []
    return [load_json(path) for path in sorted(base.glob(f"*/{CULPRIT_FILE}"))]


def culprit_record(root: Path, row: str) -> JSON:
    """The row's culprit/<row>/culprit.json, parsed (None: none, or it does not parse)."""
    return load_json(root / CULPRIT_DIR / row / CULPRIT_FILE)


def drop_culprit(root: Path, row: str) -> bool:
    """Remove the row's stored culprit answer (it rests on cells that are no longer a
    first bad image and its last good one); whether there was one."""
    path = root / CULPRIT_DIR / row / CULPRIT_FILE
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        return True
    return False


def day_record(root: Path, row: str) -> JSON:
    """The row's day/<row>/day.json, parsed (None: none, or it does not parse)."""
    return load_json(root / DAY_DIR / row / DAY_FILE)
