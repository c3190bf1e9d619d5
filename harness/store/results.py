"""`reports/<sweep>/<timestamp>/`: cells/<id>/{samples.jsonl,result.json}, results.json.
Writes are atomic (temp file, fsync, rename), a directory locked while a sweep writes it;
`--resume` skips cells complete from the same run (`harness.result.runkey`). Also the only
readers of where.json, culprit.json and day.json. And saved runs (`Saved`): one cell's
result.json and samples.jsonl under a name, for a later run of the same code to compare
against (`check(..., save=, baseline=)`, `--harness-save/-compare`): a one-cell results
directory, replaced atomically (samples first), so a reader sees the old run or the new,
and xdist workers on other keys never meet.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar, cast

from harness.errors import InputError, StoreError
from harness.protocol.ingest import read_samples
from harness.protocol.series import Series
from harness.result.codec import JSON, DecodeError, parse
from harness.result.model import SCHEMA, CellResult, Planned, load_result
from harness.store.resultsjson import Stamp, lines_of, stamp_of
from harness.store.runs import (
    PLAN_FILE,
    SWEEP,
    kind_of,
    made_from,
    name_of,
    newest,
    other_matrix,
    plan_json,
    require,
    resumable,
    resume_copy,
    runs_of,
)

__all__ = ["PLAN_FILE", "SCHEMA", "RunStore", "SeriesCache", "atomic_write_parts",
           "atomic_write_text", "load_json", "load_json_keys", "long_lived", "read_kept",
           "samples_path", "write_json"]


T = TypeVar("T")


def _hint(exc: OSError) -> str:
    return {errno.ENOSPC: "the disk is full: free space or use --out elsewhere",
            errno.EROFS: "the file system is read-only: use --out DIR on a writable one",
            errno.EACCES: "permission denied: use --out DIR you can write"}.get(
                exc.errno or 0, "check the results directory")


def atomic_write_text(path: Path, text: str, durable: bool = True) -> None:
    """Replace `path` with `text` atomically (fsync first where `durable`).

    Raises:
        StoreError: the directory is read-only, full, or missing.
    """
    atomic_write_parts(path, [text], durable)


def atomic_write_parts(path: Path, parts: Iterable[str], durable: bool = True) -> None:
    """Replace `path` atomically with the text `parts` make, never held whole.

    Raises:
        StoreError: the directory is read-only, full, or missing.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("w", encoding="utf-8") as f:
            for part in parts:
                f.write(part)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write {path}: {exc.strerror}\n  fix: {_hint(exc)}") from exc


def write_json(path: Path, data: JSON, durable: bool = True) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n",
                      durable)


def load_json(path: Path) -> JSON:
    """Read JSON written by this module; a missing or broken file gives None."""
    try:
        return parse(path.read_bytes())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Cells:
    """A directory's cells as read: results, unreadable ones (id -> why), and stamps."""

    results: dict[str, CellResult]
    unreadable: dict[str, str]
    stored: dict[str, Stamp]


def read_cells(root: Path, fix: str = "") -> Cells:
    """Every cells/<id>/result.json under `root`; one cut short is unreadable.

    Raises:
        InputError: a result.json of the wrong shape (names the file and key, then `fix`).
    """
    results: dict[str, CellResult] = {}
    unreadable: dict[str, str] = {}
    stored: dict[str, Stamp] = {}
    with _collector_paused(), lines_of(root) as lines:
        cells = os.path.join(root, "cells")
        for name in _result_files(root):
            file = os.path.join(cells, name, "result.json")
            indexed = lines.result(name, file) if lines is not None else None
            if indexed is not None:     # its line of results.json, the file unchanged
                results[indexed[0].id], stored[indexed[0].id] = indexed
                continue
            if not os.path.exists(file):
                continue
            path = root / "cells" / name / "result.json"
            try:
                with path.open("rb") as f:
                    st = os.fstat(f.fileno())
                    data = parse(f.read())
            except (OSError, ValueError):
                data = None
            if not isinstance(data, dict) or "verdict" not in data:
                unreadable[path.parent.name] = f"{path}: not a whole result.json (cut short?)"
                continue
            try:
                res = load_result(data)
            except DecodeError as exc:
                raise InputError(f"{path}: {exc}{fix}") from exc
            results[res.id] = res
            if data.get("schema") == SCHEMA:
                stored[res.id] = stamp_of(st)
    return Cells(results, unreadable, stored)


def _result_files(root: Path) -> list[str]:
    """The cell directories under `root` holding a result.json, by id (faster than a glob)."""
    try:
        return sorted(e.name for e in os.scandir(root / "cells") if e.is_dir())
    except OSError:
        return []


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cycle collector off while results are read: they hold no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_kept(read: Callable[[], T]) -> T:
    """`read()` with the collector paused and its objects frozen (see `long_lived`)."""
    was = gc.isenabled()
    gc.disable()
    try:
        return read()
    finally:
        gc.freeze()
        if was:
            gc.enable()


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """Freeze the objects made so far out of the collector's passes until the block ends
    (`gc.freeze`): read results hold no cycles. Cycles made inside are still collected."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class RunStore:
    """One sweep's results directory (`durable`: each file fsynced)."""

    def __init__(self, root: Path, durable: bool = True):
        # Absolute: cells run in other working directories.
        self.root = root.absolute()
        self.durable = durable
        self._lock: IO[str] | None = None
        # cell id -> (stamp, result) of the cells this store wrote or read: results.index
        self.stamped: dict[str, tuple[Stamp, CellResult]] = {}

    @classmethod
    def open(cls, base: Path, name: str, resume: bool | Path,
             matrix: Path | None = None, started: float | None = None) -> RunStore:
        """A new directory named by `started` (default now), or with `resume` a sweep of
        `name` to continue: the one given, else the newest (of `matrix`, `runs.resumable`).

        Raises: InputError: no sweep of this matrix to resume; StoreError: cannot create or
        lock the directory.
        """
        if isinstance(resume, Path):
            if kind_of(resume) is None:  # reports/NAME, as report takes it: its newest
                resume = newest(resume, (SWEEP,), name) or resume
            require(resume, (SWEEP,), "--resume")
            recorded = name_of(resume)
            if recorded and recorded != name:
                raise InputError(f"--resume {resume}: a sweep of the matrix {recorded!r}, "
                                 f"not {name!r}; --resume continues a sweep of the same "
                                 "matrix (or run without --resume)")
            if matrix is not None and not made_from(resume, matrix):
                raise other_matrix(resume, matrix, base)
            store = cls(resume)
        elif resume:
            found = resumable(base / name, name, matrix)
            other = newest(base / name, (SWEEP,), name)
            if found is None and other is not None and matrix is not None:
                raise other_matrix(other, matrix, base)
            if found is None:
                for running in runs_of(base / name, (SWEEP,), name)[-1:]:
                    busy = cls(running)     # a sweep before its first cell: in use by it?
                    busy.lock()
                    busy.unlock()
                raise InputError(f"--resume: no earlier sweep of {name!r} under {base}/{name}; "
                                 "run without --resume first")
            store = cls(found)
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
            root = base / name / stamp
            n = 1
            while root.exists():
                n += 1
                root = base / name / f"{stamp}-{n}"
            store = cls(root)
        store.lock()
        return store

    def mark(self, kind: str, name: str, matrix: str, cells: tuple[Planned, ...] = (),
             started: float | None = None, resumed: float | None = None) -> None:
        """Record what made the directory in plan.json.

        Raises:
            StoreError: it cannot be written.
        """
        self.write(PLAN_FILE, plan_json(kind, name, matrix, cells, started, resumed))

    def lock(self) -> None:
        resumed = self.root.is_dir()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            f = (self.root / ".lock").open("a+", encoding="utf-8")
        except OSError as exc:
            if resumed:     # --out elsewhere finds nothing to resume: resume a copy
                raise StoreError(f"cannot write into results directory {self.root} to "
                                 f"resume it: {exc.strerror}\n  fix: resume a copy: "
                                 f"{resume_copy(self.root)}") from exc
            raise StoreError(f"cannot create results directory {self.root}: {exc.strerror}\n"
                             "  fix: use --out DIR on a writable file system") from exc
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            f.seek(0)
            who = f.read().strip() or "another harness"
            f.close()
            raise StoreError(f"{self.root} is in use by {who}\n  fix: wait for it to finish, "
                             "or write to another directory with --out") from exc
        try:
            same = os.fstat(f.fileno()).st_ino == os.stat(self.root / ".lock").st_ino
        except OSError:
            same = False
        if not same:  # its holder removed it as we locked it: lock the new one
            f.close()
            self.lock()
            return
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}\n")
        f.flush()
        self._lock = f

    def unlock(self) -> None:
        if self._lock is not None:
            # Removed while still held: a sweep that opens it next gets a new file.
            with contextlib.suppress(OSError):
                (self.root / ".lock").unlink()
            self._lock.close()
            self._lock = None

    def cell_dir(self, cell_id: str, fresh: bool = False) -> Path:
        """The cell's directory (emptied with `fresh`).

        Raises:
            StoreError: it cannot be removed or created.
        """
        d = self.root / "cells" / cell_id
        try:
            if fresh and d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot prepare {d}: {exc.strerror}\n  fix: "
                             f"{_hint(exc)}") from exc
        return d

    def load_cell(self, cell_id: str) -> CellResult | None:
        """The cell's finished result (schema 1 or 2), or None where unreadable."""
        try:
            with (self.root / "cells" / cell_id / "result.json").open("rb") as f:
                stamp = stamp_of(os.fstat(f.fileno()))
                data = parse(f.read())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or "verdict" not in data:
            return None
        try:
            res = load_result(data)
        except DecodeError:
            return None
        if data.get("schema") == SCHEMA:
            self.stamped[cell_id] = (stamp, res)
        return res

    def write_cell(self, result: CellResult) -> None:
        """Write the cell's result, once: when its verdict is final."""
        path = self.cell_dir(result.id) / "result.json"
        write_json(path, result.to_json(), self.durable)
        with contextlib.suppress(OSError):
            self.stamped[result.id] = (stamp_of(os.stat(path)), result)

    def write(self, name: str, data: JSON) -> Path:
        path = self.root / name
        if isinstance(data, str):
            atomic_write_text(path, data, self.durable)
        else:
            write_json(path, data, self.durable)
        return path

    def samples_path(self, cell_id: str) -> Path:
        return samples_path(self.root, cell_id)


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
    """Some keys of the JSON object in `path`, read from its start until all are found
    (results.json keeps cells last); {} for a missing or broken file."""
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


def samples_path(root: Path, cell_id: str) -> Path:
    return root / "cells" / cell_id / "samples.jsonl"


class SeriesCache:
    """Each cell's parsed samples by cell id: kept as the sweep parsed them, else read from
    samples.jsonl on use; with a directory to reread from, only the latest KEEP held."""

    KEEP = 128

    def __init__(self, root: Path | None, known: Mapping[str, Series] | None = None):
        self.root = root
        self._known: dict[str, Series] = dict(known or {})
        self._lock = threading.Lock()

    def keep(self, cell_id: str, series: Series) -> None:
        with self._lock:
            self._known.pop(cell_id, None)
            self._known[cell_id] = series
            self._bound()

    def __len__(self) -> int:
        """How many parsed series are held now."""
        with self._lock:
            return len(self._known)

    def _bound(self) -> None:
        """Let go of the oldest series beyond KEEP whose samples are on disk."""
        if self.root is None or len(self._known) <= self.KEEP:
            return
        for cid in list(self._known)[: len(self._known) - self.KEEP]:
            if samples_path(self.root, cid).is_file():
                del self._known[cid]

    def at(self, root: Path) -> SeriesCache:
        """The same series, with the others read from `root`."""
        with self._lock:
            return SeriesCache(root, self._known)

    def peek(self, cell_id: str) -> Series | None:
        """The cell's series, not kept if read from disk (a one-pass walk)."""
        with self._lock:
            found = self._known.get(cell_id)
        if found is None and self.root is not None:
            path = samples_path(self.root, cell_id)
            if path.is_file():
                return read_samples(path)
        return found

    def __call__(self, cell_id: str) -> Series | None:
        """The cell's series; None when it was not kept and has no samples file."""
        with self._lock:
            found = self._known.get(cell_id)
            if found is None and self.root is not None:
                path = samples_path(self.root, cell_id)
                if path.is_file():
                    found = self._known[cell_id] = read_samples(path)
                    self._bound()
            return found


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
    """Remove the row's stored culprit answer, now stale; whether there was one."""
    path = root / CULPRIT_DIR / row / CULPRIT_FILE
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        return True
    return False


def day_record(root: Path, row: str) -> JSON:
    """The row's day/<row>/day.json, parsed (None: none, or it does not parse)."""
    return load_json(root / DAY_DIR / row / DAY_FILE)


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Saved:
    """Where one saved run lives: `root/cells/key/`.

    Attributes:
        root: The directory of saved runs of one name (the plugin's `.harness/NAME`).
        key, label: Its directory name (`key_of` of a test id); how comparisons name it.
    """

    root: Path
    key: str
    label: str = "saved"

    @property
    def where(self) -> Path:
        return samples_path(self.root, self.key).parent

    def exists(self) -> bool:
        return self.read() is not None

    def read(self) -> tuple[CellResult, Series] | None:
        """The saved result and its samples; None when either is missing or unreadable."""
        result = RunStore(self.root).load_cell(self.key)
        series = SeriesCache(self.root)(self.key) if result is not None else None
        return None if result is None or series is None else (result, series)


def key_of(name: str) -> str:
    """A directory name for a pytest node id: its safe characters, at most 120, plus a short
    digest where any were changed or cut, so ids never collide."""
    safe = _SAFE.sub("_", name).strip("._") or "run"
    if safe == name and len(safe) <= 120:
        return safe
    return f"{safe[:120]}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def save_cell(src: Path, cell_id: str, dest: Saved, result: CellResult) -> Path:
    """Keep the cell `cell_id` of results directory `src` and `result` as `dest`, each
    file replaced atomically; returns the saved directory.

    Raises:
        StoreError: the directory cannot be written, or the cell has no samples.
    """
    where = dest.where
    source = samples_path(src, cell_id)
    target = samples_path(dest.root, dest.key)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        where.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot save {source} as {target}: {exc.strerror}\n  fix: check "
                         f"that {dest.root} is writable") from exc
    write_json(where / "result.json", result.to_json())
    return where
