"""First bad version per row (pure): images in matrix order, verdicts in, answer out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.analysis.kinds import BAD, GOOD

FRAMEWORKS = ("tensorflow", "nvidia-tensorflow", "torch", "jax", "onnxruntime", "onnx",
              "numpy", "keras", "nvidia-", "scikit-image", "opencv")
ENV_KEYS = ("CUDA_VERSION", "CUDNN_VERSION", "NCCL_VERSION", "NVIDIA_TENSORFLOW_VERSION",
            "TENSORFLOW_VERSION")


@dataclass(frozen=True)
class RowAnswer:
    row: str
    gpu: str
    scenario: str
    cells: list[tuple[str, str, str]]          # (image label, verdict, cell id) in order
    first_bad: str | None
    last_good: str | None
    contiguous: bool
    sentence: str
    diff: list[tuple[str, str, str]] = field(default_factory=list)  # (what, good, bad)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_bad(ordered: Sequence[tuple[str, str]]) -> tuple[str | None, str | None, bool]:
    """(first bad, last good before it, bad cells contiguous?) over (label, verdict) pairs.

    The first bad is the first bad image after a good one; if the very first image is
    already bad, it is reported with no last good. Cells that are neither good nor bad
    (ambiguous, not-applicable) are skipped.
    """
    last_good: str | None = None
    bad_at: list[int] = []
    first: str | None = None
    good_before: str | None = None
    for i, (label, verdict) in enumerate(ordered):
        if verdict in GOOD:
            last_good = label
        elif verdict in BAD:
            bad_at.append(i)
            if first is None:
                first, good_before = label, last_good
    decided = [i for i, (_, v) in enumerate(ordered) if v in GOOD | BAD]
    contiguous = True
    if bad_at:
        span = [i for i in decided if bad_at[0] <= i <= bad_at[-1]]
        contiguous = all(i in bad_at for i in span)
    return first, good_before, contiguous


def fingerprint_diff(good: Mapping[str, Any], bad: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """What differs between two cells' fingerprints: image, Python, CUDA env, packages, GPU."""
    out: list[tuple[str, str, str]] = []

    def add(what: str, a: Any, b: Any) -> None:
        if a != b:
            out.append((what, "-" if a is None else str(a), "-" if b is None else str(b)))

    ga, gb = good.get("fingerprint") or {}, bad.get("fingerprint") or {}
    add("image", good.get("image", {}).get("ref"), bad.get("image", {}).get("ref"))
    add("digest", good.get("image", {}).get("digest"), bad.get("image", {}).get("digest"))
    add("python", ga.get("python"), gb.get("python"))
    add("os", ga.get("platform"), gb.get("platform"))
    ea, eb = ga.get("env") or {}, gb.get("env") or {}
    for key in ENV_KEYS:
        add(key, ea.get(key), eb.get(key))
    pa, pb = ga.get("packages") or {}, gb.get("packages") or {}
    # Frameworks first: they are what a reader looks for in a long pip diff.
    for name in sorted(set(pa) | set(pb), key=lambda n: (not n.startswith(FRAMEWORKS), n)):
        add(f"pip {name}", pa.get(name), pb.get(name))
    gpa, gpb = ga.get("gpu") or {}, gb.get("gpu") or {}
    names_a = [d.get("name") for d in gpa.get("devices", [])] if gpa else None
    names_b = [d.get("name") for d in gpb.get("devices", [])] if gpb else None
    add("gpu", names_a, names_b)
    add("driver", gpa.get("driver") if gpa else None, gpb.get("driver") if gpb else None)
    return out


def answer_rows(results: Mapping[str, Mapping[str, Any]]) -> list[RowAnswer]:
    """Group stored cell results by row, order by image index, name the first bad."""
    rows: dict[str, list[Mapping[str, Any]]] = {}
    for res in results.values():
        rows.setdefault(res["row"], []).append(res)
    answers: list[RowAnswer] = []
    for row, items in rows.items():
        items.sort(key=lambda r: r["image"]["index"])
        ordered = [(r["image"]["label"], r["verdict"]) for r in items]
        bad, good, contiguous = first_bad(ordered)
        if bad is None:
            sentence = "no bad image"
        elif good is None:
            sentence = f"bad from the first image ({bad}); no good image before it"
        else:
            sentence = f"first bad: {bad} (last good: {good})"
        if bad is not None and not contiguous:
            sentence += "; bad cells are not contiguous (flaky, or fixed then broken again)"
        diff: list[tuple[str, str, str]] = []
        if bad is not None and good is not None:
            by_label = {r["image"]["label"]: r for r in items}
            diff = fingerprint_diff(by_label[good], by_label[bad])
        first = items[0]
        answers.append(RowAnswer(row, first["gpu"]["label"], first["scenario"]["id"],
                                 [(r["image"]["label"], r["verdict"], r["id"]) for r in items],
                                 bad, good, contiguous, sentence, diff))
    answers.sort(key=lambda a: a.row)
    return answers
