"""Generated memory series for the one decision's property test (and its benchmark):
linear leaks of many rates, linear and saturating fills that stop, sawtooth, steps, and
noise at the recorded runs' levels (tests/data/recorded: a heap read after
gc.collect() jitters by ~64 B, a busy one by ~5 KiB)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

NOISE = (0.0, 64.0, 512.0, 5120.0)
SHAPES = ("flat", "leak", "fill", "linear-fill", "sawtooth", "step")


@dataclass(frozen=True)
class Shape:
    """One generated series: its shape, its figures, and the samples an agent writes."""

    shape: str
    calls: int
    rate: float          # bytes/call (leak, linear fill), amplitude/period (others)
    size: float          # the fill's or step's bytes, the sawtooth's amplitude
    length: float        # tau, the linear fill's last call, the sawtooth's period
    noise: float
    seed: int
    every: int = 2
    warmup: int = 10

    def level(self, t: float) -> float:
        if self.shape == "leak":
            return self.rate * t
        if self.shape == "fill":
            return self.size * (1 - math.exp(-t / self.length))
        if self.shape == "linear-fill":
            return self.rate * min(t, self.length)
        if self.shape == "sawtooth":
            return self.size * ((t % self.length) / self.length)
        if self.shape == "step":
            return self.size if t >= self.length else 0.0
        return 0.0

    def samples(self) -> list[dict[str, Any]]:
        rng = random.Random(self.seed)
        base = 8e6
        out: list[dict[str, Any]] = [
            {"type": "sample", "src": "step", "phase": "warmup", "i": self.warmup,
             "heap": base, "dt": [1e-4] * self.warmup}]
        for k in range(1, self.calls // self.every + 1):
            t = k * self.every
            out.append({"type": "sample", "src": "step", "phase": "measure",
                        "i": self.warmup + t, "heap": base + self.level(t)
                        + rng.gauss(0, self.noise), "dt": [1e-4] * self.every})
        return out


@st.composite
def shapes(draw: Any, calls: tuple[int, int] = (80, 600)) -> Shape:
    """A generated series (see the module's docstring)."""
    shape = draw(st.sampled_from(SHAPES))
    n = draw(st.integers(*calls))
    return Shape(shape, n,
                 rate=draw(st.sampled_from((50.0, 150.0, 400.0, 2048.0, 8192.0))),
                 size=draw(st.sampled_from((8192.0, 65536.0, 2.0**20, 4 * 2.0**20))),
                 length=float(draw(st.integers(5, max(6, n)))),
                 noise=draw(st.sampled_from(NOISE)), seed=draw(st.integers(0, 2**16)))
