"""matrix.yaml -> validated model -> Cells (pure)."""

from harness.matrixfile.load import load, parse, parse_located
from harness.matrixfile.model import Cell, GpuSel, ImageSpec, Matrix, RunSettings, ScenarioSpec
from harness.matrixfile.select import select

__all__ = ["Cell", "GpuSel", "ImageSpec", "Matrix", "RunSettings", "ScenarioSpec", "load",
           "parse", "parse_located", "select"]
