"""Verdicts from series: memory.py (within a run), baseline.py (between cells), decision.py.

Hands on only `AnalysisConfig`, so the spec imports it without the runtimes; users import
the module they call. NumPy users that must wait for a sweep's first container import
inside the function, with a `# lazy:` reason (tests/unit/test_startup.py).
"""

from harness.thresholds import AnalysisConfig

__all__ = ["AnalysisConfig"]
