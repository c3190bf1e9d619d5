"""`-k EXPR` selection of cells, as pytest does: substrings joined by and/or/not."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from harness.errors import InputError
from harness.matrixfile.model import Cell

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")
Pred = Callable[[str], bool]


def _either(a: Pred, b: Pred) -> Pred:
    return lambda s: a(s) or b(s)


def _both(a: Pred, b: Pred) -> Pred:
    return lambda s: a(s) and b(s)


def compile_expr(expr: str) -> Pred:
    """Compile `-k` text into a predicate over cell ids.

    Raises:
        InputError: the expression does not parse.
    """
    tokens = _TOKEN.findall(expr)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise InputError(f"-k {expr!r}: unexpected end of expression")
        pos += 1
        return str(tokens[pos - 1])

    def chain(word: str, operand: Callable[[], Pred], join: Callable[[Pred, Pred], Pred]) -> Pred:
        left = operand()
        while peek() == word:
            take()
            left = join(left, operand())
        return left

    def p_or() -> Pred:
        return chain("or", p_and, _either)

    def p_and() -> Pred:
        return chain("and", p_not, _both)

    def p_not() -> Pred:
        if peek() == "not":
            take()
            inner = p_not()
            return lambda s: not inner(s)
        return atom()

    def atom() -> Pred:
        tok = take()
        if tok == "(":
            inner = p_or()
            if take() != ")":
                raise InputError(f"-k {expr!r}: expected ')'")
            return inner
        if tok in (")", "and", "or", "not"):
            raise InputError(f"-k {expr!r}: unexpected {tok!r}")
        word = tok.lower()
        return lambda s: word in s.lower()

    if not tokens:
        return lambda s: True
    pred = p_or()
    if pos != len(tokens):
        raise InputError(f"-k {expr!r}: unexpected {tokens[pos]!r}")
    return pred


def select(cells: Sequence[Cell], expr: str | None) -> list[Cell]:
    """Cells whose id matches `expr`.

    Raises:
        InputError: bad expression, or it selects nothing.
    """
    if not expr:
        return list(cells)
    pred = compile_expr(expr)
    chosen = [c for c in cells if pred(c.id)]
    if not chosen:
        ids = ", ".join(c.id for c in cells[:8])
        raise InputError(f"-k {expr!r} selects no cell; cell ids look like: {ids}")
    return chosen
