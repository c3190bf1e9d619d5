"""Checks before the first cell: what can be known on the host is not learnt from a
container per image.

`compile_scenarios` compiles every scenario file with the host's Python: a syntax error
is the user's input (exit 2, file:line), not a crash to report against every image.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harness.analysis.config import AnalysisConfig
from harness.errors import InputError
from harness.matrixfile.model import Cell, RunSettings


def decidable_iterations(settings: RunSettings, cfg: AnalysisConfig) -> int:
    """Measured iterations that give `cfg.min_samples` memory samples from step samples
    alone (one every `sample_every` calls): a run of this length can always decide."""
    return cfg.min_samples * settings.sample_every


def check_lengths(cells: Iterable[Cell], cfg: AnalysisConfig, refuse: bool) -> list[str]:
    """Cells too short to ever decide a trend: a memory trend needs `min_samples`
    samples at distinct calls, so fewer calls than that can never tell (timer samples of
    slow steps may add samples, never distinct calls). Only how such a run ends (an
    out-of-memory, a crash, a timeout) can be told from it.

    Args:
        refuse: The length came from the command line (`--iterations`): refuse it. A
            length the matrix sets is the author's (a smoke run of a heavy scenario, an
            OOM check): it is said, not refused.

    Returns:
        One warning per length the matrix sets too short (without `refuse`).

    Raises:
        InputError: with `refuse`, the cells, the length and the length they need.
    """
    short: dict[tuple[int, int], list[Cell]] = {}
    for cell in cells:
        s = cell.settings
        if s.agent_iterations < cfg.min_samples:
            short.setdefault((s.agent_iterations, s.sample_every), []).append(cell)
    said: list[str] = []
    for (iterations, every), group in short.items():
        need = decidable_iterations(group[0].settings, cfg)
        ids = [c.id for c in group]
        head = (f"{iterations} measured iteration{'s' if iterations != 1 else ''} cannot "
                f"decide a trend ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}): a "
                f"memory trend needs {cfg.min_samples} samples at distinct calls "
                "(analysis.min_samples)")
        if refuse:
            raise InputError(f"{head}\n  fix: --iterations {need} or more (at sample_every "
                             f"{every}: {cfg.min_samples} samples)")
        said.append(f"{head}; only how it ends (oom, crash, timeout) can be told: give it "
                    f"{need} iterations or more to decide a leak or slowdown")
    return said


def compile_scenarios(cells: Iterable[Cell]) -> None:
    """Compile each distinct scenario script once.

    Raises:
        InputError: the first file that does not read or compile, as file:line: message.
    """
    problems: list[str] = []
    seen: set[Path] = set()
    for cell in cells:
        script = cell.scenario.script
        if script in seen:
            continue
        seen.add(script)
        try:
            source = script.read_bytes()
        except OSError as exc:
            problems.append(f"{script}: cannot read the scenario: {exc.strerror}")
            continue
        try:
            compile(source, str(script), "exec", dont_inherit=True)
        except SyntaxError as exc:
            line = f":{exc.lineno}" if exc.lineno else ""
            text = (exc.text or "").rstrip()
            where = f"\n    {text.strip()}" if text else ""
            problems.append(f"{script}{line}: {type(exc).__name__}: {exc.msg}{where}")
        except ValueError as exc:  # NUL bytes
            problems.append(f"{script}: {exc}")
    if problems:
        raise InputError("\n".join(problems) + "\n  fix: correct the scenario; nothing ran")
