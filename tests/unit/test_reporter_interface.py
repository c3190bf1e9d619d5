"""Every renderer declares the one interface: a `Reporter` subclass with its own `render`."""

from __future__ import annotations

import inspect

import pytest

import harness.report as report
from harness.report.model import Report, Reporter


def renderers() -> list[type]:
    return [obj for name, obj in vars(report).items()
            if inspect.isclass(obj) and name.endswith("Reporter") and obj is not Reporter]


def test_every_renderer_is_a_reporter_that_renders() -> None:
    found = renderers()
    assert {c.__name__ for c in found} >= {"ConsoleReporter", "MarkdownReporter",
                                           "HtmlReporter", "JunitReporter", "IssueReporter"}
    for cls in found:
        assert issubclass(cls, Reporter), cls
        assert cls.render is not Reporter.render, f"{cls.__name__} does not define render"


def test_the_base_reporter_does_not_render_silently() -> None:
    with pytest.raises(NotImplementedError):
        Reporter(Report.from_results("x", {}, {}, None)).render(None)  # type: ignore[arg-type]
