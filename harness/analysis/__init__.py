"""Verdicts from series: growth.py (within a run), pooled.py (between cells), verdict.py.

Import `harness.analysis.verdict` for decisions; this package's namespace holds only the
configuration so that the spec can import it without pulling in the runtimes.
"""

from harness.thresholds import AnalysisConfig

__all__ = ["AnalysisConfig"]
