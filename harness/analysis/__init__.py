"""Verdicts from series: memory.py (within a run), baseline.py (between cells), decision.py.

The package hands on only the configuration (`AnalysisConfig`), so that the spec imports
it without pulling in the runtimes; every module of this package imports at its top, and
its users import the module they call (`analysis.baseline`, `analysis.decision`). Where
NumPy must wait for a sweep's first container (tests/unit/test_startup.py), the sweep
imports them inside the function that first needs them (`stages.context.verdict`,
`stages.settle`), each with its `# lazy:` reason.
"""

from harness.thresholds import AnalysisConfig

__all__ = ["AnalysisConfig"]
