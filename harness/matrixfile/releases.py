"""Release order of image tags (or labels): NGC calendar tags by (YY, MM, P), anything
else as a version of the same shape. `harness watch` picks new tags with it;
`harness history` slots in images that only older runs measured.

- NGC calendar tags `YY.MM[.P][-suffix]` (`23.01-tf1-py3`): only tags with the
  baseline's suffix (`-tf1-py3`; no suffix matches no suffix), ordered by (YY, MM, P).
- Anything else is compared as a version: only tags with the baseline's shape, i.e.
  the same text once each run of digits is blanked out (`2.12.0` goes with `2.13.1`,
  not with `2.13.0rc1`, `2.13` or `latest`), ordered by the digit runs as integers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

_CALENDAR = re.compile(r"(\d{2})\.(\d{2})(?:\.(\d+))?(-.+)?")
_DIGITS = re.compile(r"\d+")

TagKey = tuple[int, ...]


def tag_order(baseline: str) -> Callable[[str], TagKey | None]:
    """The sort key of tags comparable with `baseline`; None for the others."""
    cal = _CALENDAR.fullmatch(baseline)
    if cal is not None:
        suffix = cal[4] or ""

        def calendar(tag: str) -> TagKey | None:
            m = _CALENDAR.fullmatch(tag)
            if m is None or (m[4] or "") != suffix:
                return None
            return int(m[1]), int(m[2]), int(m[3] or 0)

        return calendar
    shape = _DIGITS.sub("#", baseline)

    def version(tag: str) -> TagKey | None:
        if _DIGITS.sub("#", tag) != shape:
            return None
        return tuple(int(d) for d in _DIGITS.findall(tag))

    return version


def release_order(runs: Sequence[Sequence[str]]) -> list[str]:
    """Every image of `runs` (each a run's image list in its matrix's order, the newest
    run first) in release order: the newest run's order as it is; an image only older
    runs had goes where its tag falls among the images it compares with (`tag_order`:
    before the first one released after it, else after the last one before it), and an
    image that compares with none goes right after the image its own run listed before
    it (else before the one after it, else last)."""
    order: list[str] = list(dict.fromkeys(runs[0])) if runs else []
    for images in runs[1:]:
        for pos, image in enumerate(images):
            if image not in order:
                order.insert(_slot(order, image, images[:pos], images[pos + 1:]), image)
    return order


def _slot(order: list[str], image: str, before: Sequence[str], after: Sequence[str]) -> int:
    key = tag_order(image)
    mine = key(image)
    assert mine is not None        # a tag always compares with itself
    comparable = [(i, k) for i, known in enumerate(order) if (k := key(known)) is not None]
    if comparable:
        later = [i for i, k in comparable if k > mine]
        return later[0] if later else comparable[-1][0] + 1
    for known in reversed(before):
        if known in order:
            return order.index(known) + 1
    for known in after:
        if known in order:
            return order.index(known)
    return len(order)
