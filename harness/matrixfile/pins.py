"""A `pip:` entry as written: a pin pip would refuse is the matrix's mistake, said at its
line (`pin_mistake`), before any venv is built; the project name's pattern (`NAME`),
which lock files (`lockfile`) read too."""

from __future__ import annotations

import re

# A project name as PEP 508 writes it.
NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
# A pin whose operator is mistyped (`pkg=1.0`, `pkg=>1.0`, `pkg=<1.0`, `pkg<>1.0`): a
# matrix mistake at the file's line, not an image the resolver "cannot install" (exit 3).
_MISTYPED = re.compile(rf"^(?P<name>{NAME}(?:\[[^\]]*\])?)\s*(?P<op>=>|=<|<>|=(?![=<>~]))"
                       r"\s*(?P<version>[0-9][^\s,;]*)$")
_MEANT = {"=": "==", "=>": ">=", "=<": "<=", "<>": "!="}
# A pin of a name and version comparisons (up to its marker), each comparison checked
# alone: an operator and a version (`==1.*`, `===1.0+local`).
_COMPARED = re.compile(rf"^\s*(?P<name>{NAME})\s*(?:\[[^\]]*\])?\s*(?P<spec>[=!~<>][^;]*)"
                       r"(?:;.*)?$")
_OPERATORS = ("===", "==", "!=", "~=", "<=", ">=", "<", ">")
_COMPARISON = re.compile(r"^\s*(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9][A-Za-z0-9.*+!_-]*\s*$")


def pin_mistake(pins: list[str]) -> tuple[int, str, str] | None:
    """The first pin pip would refuse as written, the file's mistake (exit 2 at its
    line), not an image that cannot be had (exit 3, after the other venvs are built):
    its index, what is wrong and the fix. An operator mistyped (`pkg=1.0`: the pin as
    meant) or a comparison without a version (`six===`, `six>=1.0,`: issue 79 item 7);
    a pin of another form (a path, `pkg @ URL`) is pip's to read."""
    for at, pin in enumerate(pins):
        if (found := _MISTYPED.match(pin.strip())) is not None:
            return at, (f"{pin!r}: {found['op']!r} is not a version comparison (pip would "
                        "refuse it when the venv is built)"), (
                f"write {found['name']}{_MEANT[found['op']]}{found['version']}")
        if (head := _COMPARED.match(pin)) is None:
            continue
        bad = next((part.strip() for part in head["spec"].split(",")
                    if not _COMPARISON.match(part)), None)
        if bad is not None:
            has = next((op for op in _OPERATORS if bad == op), None)
            return at, (f"{pin!r}: " + (f"{has!r} has no version after it" if has else
                                        f"{bad!r} is no version comparison") +
                        " (pip would refuse it when the venv is built)"), (
                f"write {head['name']}==VERSION (or >=, <, ~=, !=, comma-separated), or "
                f"{head['name']} alone for its newest release")
    return None
