"""Small text helpers the renderers share: Markdown table cells, signed KiB."""

from __future__ import annotations


def md(text: object) -> str:
    """`text` safe inside a Markdown table cell (no pipes, newlines or raw HTML)."""
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def kib(value: float) -> str:
    """Bytes as signed KiB, two decimals, without a "-0.00" for tiny negative noise."""
    return f"{round(value / 1024, 2) + 0.0:+.2f}"
