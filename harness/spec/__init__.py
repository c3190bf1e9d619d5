"""matrix.yaml -> validated model -> Cells (pure)."""

from harness.spec.load import load, parse, parse_located
from harness.spec.model import Cell, GpuSel, ImageSpec, Matrix, RunSettings, ScenarioSpec
from harness.spec.select import select

__all__ = ["Cell", "GpuSel", "ImageSpec", "Matrix", "RunSettings", "ScenarioSpec", "load",
           "parse", "parse_located", "select"]
