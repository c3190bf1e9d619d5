"""matrix.yaml -> validated model -> Cells (pure)."""

from harness.matrixfile.cells import select
from harness.matrixfile.load import load, parse, parse_located
from harness.matrixfile.model import Cell, GpuSel, ImageSpec, Matrix, RunSettings, ScenarioSpec

__all__ = ["Cell", "GpuSel", "ImageSpec", "Matrix", "RunSettings", "ScenarioSpec", "load",
           "parse", "parse_located", "select"]
