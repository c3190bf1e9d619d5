"""A cell's result in words: the key numbers every report and answer shows."""

from __future__ import annotations

from harness.result.model import CellResult


def human_seconds(seconds: float) -> str:
    """0.0000159 -> '15.9 µs', 0.0123 -> '12.3 ms', 2.5 -> '2.5 s'."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def cell_numbers(res: CellResult) -> str:
    """Key numbers of a cell, each saying what it is: growth per call of the deciding
    source, median time per call, and the ratios against the row's baseline."""
    parts: list[str] = []
    source = res.deciding_source
    if source is not None:
        slope = res.memory[source].slope
        parts.append(f"{source} {round(slope / 1024, 1) + 0.0:+.1f} KiB/call")  # no "-0.0"
    step = res.summary.median_step_s
    if step is not None:
        parts.append(f"{human_seconds(step)}/call")
    vs = res.vs_baseline
    if vs is None:
        return ", ".join(parts)
    # The rounds' direction when they ran; a pooled one alone is only "suspected".
    conf, steps, peak = vs.confirmation, vs.steps, vs.peak_rss
    direction = vs.said_direction
    if conf is not None and direction not in (None, "~"):
        parts.append(f"time {conf.ratio:.2f}x baseline ({direction} in "
                     f"{len(conf.decided_by)} interleaved rounds)")
    elif steps is not None and direction not in (None, "~"):
        parts.append(f"time {steps.ratio:.2f}x baseline")
    if peak is not None and peak.direction != "~":
        parts.append(f"peak RSS {peak.ratio:.2f}x baseline")
    return ", ".join(parts)


def cell_text(res: CellResult) -> str:
    """'leak: heap +5.9 KiB/call, 15.9 µs/call, peak RSS 1.12x baseline'."""
    numbers = cell_numbers(res)
    return f"{res.verdict}: {numbers}" if numbers else str(res.verdict)
