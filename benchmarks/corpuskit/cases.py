"""The corpus's cases: each `benchmarks/corpus/<slug>.py` is a harness scenario with a
module-level `CASE` dict (its upstream link, releases and hand-measured truth).

`CASE` is read with `ast.literal_eval`, never by importing the file: a case's module
imports its package inside `setup`, and this interpreter does not have it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "corpus"
ROLES = ("good", "bad", "fixed")        # version order in a case's matrix
KINDS = ("leak", "slowdown", "control")
# Beside every case's own requirements, so one venv per release serves harness, psleak
# and pytest-memray alike (harness builds and caches it; the other tools run in it).
PSLEAK = "psleak==0.1.6"
MEMRAY = "pytest-memray==1.11.0"


class CaseError(ValueError):
    """A case file whose CASE is missing or malformed."""


@dataclass(frozen=True)
class Case:
    slug: str
    path: Path
    title: str
    kind: str
    link: str
    package: str | None
    versions: dict[str, str]            # role -> release, the roles present only
    extra: tuple[str, ...]
    params: dict[str, Any]
    truth: dict[str, dict[str, float]]
    measured: str
    meta: dict[str, Any] = field(default_factory=dict)

    def releases(self) -> list[tuple[str, str]]:
        """(role, release) in version order; a release named by two roles once."""
        seen: dict[str, str] = {}
        for role in ROLES:
            v = self.versions.get(role)
            if v is not None and v not in seen:
                seen[v] = role
        return [(role, v) for v, role in seen.items()]

    def bad_release(self, role: str) -> bool:
        """The truth of one release: the bug is in it (the bad role of a leak or a
        slowdown), not (good, fixed, every control)."""
        return self.kind != "control" and role == "bad"

    def grows(self, release: str) -> bool:
        """A release (one the case does not call bad) whose truth, measured over a run long
        enough for a cache to level off, still grows past `GROWS_FLOOR` in its late half
        (`late_heap_b_per_call`): a small leak of its own (pandas 2.1.4's and 2.2.1's heap,
        +55 B/call from call 75,000 to 150,000), so neither a clean release for the
        false-alarm rate nor the case's bug. Such a release is reported apart."""
        return self.truth.get(release, {}).get("late_heap_b_per_call", 0.0) >= GROWS_FLOOR

    def label(self, release: str) -> str:
        """The image name of a release in the case's matrix."""
        return f"{self.package or 'python'}-{release}"

    def requirements(self, release: str, tools: bool = True, memray: bool = True
                     ) -> list[str]:
        """pip requirements of the release's venv: the package, the extras, the tools
        (psleak; pytest-memray unless `memray` is false or the case is a slowdown)."""
        reqs = [f"{self.package}=={release}"] if self.package else []
        reqs += list(self.extra)
        if tools:
            reqs += [PSLEAK] + ([MEMRAY] if memray and self.kind != "slowdown" else [])
        return reqs


# The floor a release's late growth is held to (harness's `ok_floor_bytes`, the smallest
# leak it claims to find).
GROWS_FLOOR = 16.0


def _case_dict(path: Path) -> dict[str, Any]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "CASE"):
            try:
                got = ast.literal_eval(node.value)
            except ValueError as exc:
                raise CaseError(f"{path}: CASE is not a literal dict ({exc})\n  fix: write "
                                "CASE with literal strings, numbers, lists and dicts "
                                "only") from exc
            if isinstance(got, dict):
                return got
    raise CaseError(f"{path}: no module-level `CASE = {{...}}`\n  fix: add the case's "
                    "metadata dict (see benchmarks/corpus.py's docstring)")


def load(path: Path, need_truth: bool = True) -> Case:
    """One case file (`need_truth=False`: before its truth is measured).

    Raises:
        CaseError: CASE is missing, not a literal, or lacks a key or a truth.
    """
    d = _case_dict(path)
    missing = [k for k in ("title", "kind", "link", "package", "versions", "truth",
                           "measured") if k not in d and (need_truth or k != "truth")]
    if missing:
        raise CaseError(f"{path}: CASE lacks {', '.join(missing)}\n  fix: add them")
    if d["kind"] not in KINDS:
        raise CaseError(f"{path}: CASE kind {d['kind']!r} is none of {', '.join(KINDS)}")
    versions = {r: str(v) for r, v in dict(d["versions"]).items() if v is not None}
    if not versions or set(versions) - set(ROLES):
        raise CaseError(f"{path}: CASE versions {d['versions']!r}: roles are "
                        f"{', '.join(ROLES)}, at least one set")
    case = Case(path.stem, path, str(d["title"]), str(d["kind"]), str(d["link"]),
                d["package"], versions, tuple(d.get("extra") or ()),
                dict(d.get("params") or {}), dict(d.get("truth") or {}),
                str(d.get("measured", "")),
                {k: d[k] for k in ("batch",) if k in d})
    untruthed = [v for _, v in case.releases() if v not in case.truth]
    if untruthed and need_truth:
        raise CaseError(f"{path}: CASE truth has no entry for {', '.join(untruthed)}\n"
                        "  fix: measure each release by hand (benchmarks/corpuskit/truth.py)")
    return case


def load_all(names: list[str] | None = None, batch: str | None = None) -> list[Case]:
    """Every case under benchmarks/corpus/ (files starting with `_` are helpers), or
    those whose slug contains one of `names`; with `batch`, those of that batch only
    (CASE's "batch": the held-out cases added together, e.g. "49"; "-": those of
    none)."""
    paths = sorted(p for p in CORPUS.glob("*.py") if not p.name.startswith("_"))
    if names:
        paths = [p for p in paths if any(n in p.stem for n in names)]
    if batch is not None:   # read before the truth is asked for: another batch's may lack it
        paths = [p for p in paths if str(_case_dict(p).get("batch", "-")) == batch]
    return [load(p) for p in paths]
