"""The verdict thresholds, kept under their older path: `AnalysisConfig` lives in
`harness.thresholds`, below both the matrix (`spec`) that reads it and `analysis`."""

from harness.thresholds import AnalysisConfig

__all__ = ["AnalysisConfig"]
