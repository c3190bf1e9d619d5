"""harness from Python: `check` one function as a cell, `sweep` a matrix.

`check(step)` runs a module-level function as one cell of a `runtime: local` matrix, in
a child process of this same interpreter: the agent calls `setup` once, then `step`
over and over for the time budget, reads the heap, USS and RSS as it goes, and the
verdict is the one the sweep would give (`harness.stages.orchestrator.Sweep.run_cell`, the
rule table of `harness.analysis.rules`). The functions are imported by name in the
child, so they must be importable module-level functions (not lambdas, closures or
functions of a script run as `__main__`).

A module the child can import, `leaky.py`::

    KEPT = []

    def grow():                   # keeps 1 KiB per call: a leak
        KEPT.append(bytes(1024))
        for _ in range(12):       # and works ~20 us, as a step does, on small ints
            sum(range(250))       # (never allocated: tracemalloc, which then names
                                  # the leak's line, traces no int of theirs)

    def add():                    # keeps nothing
        sum(range(100))

Each checked in about a second::

    >>> import harness
    >>> from leaky import add, grow
    >>> leaked = harness.check(grow, budget="1s")
    >>> leaked.verdict, leaked.rule, leaked.ok
    ('leak', 'leak', False)
    >>> "heap grows" in str(leaked)
    True
    >>> clean = harness.check(add, budget="1s")
    >>> clean.verdict, clean.ok
    ('ok', True)
    >>> 0 < clean.floor < 1024            # the smallest steady leak it could have missed
    True

`str(checked)` is the verdict in words: "leak (rule leak): heap grows +1.1 KiB/call ...";
an `ok` one ends with its floor: "... no leak above 40 B/call in 22,080 calls".

`sweep("matrix.yaml")` (or a matrix as a dict) runs a whole matrix as `harness sweep`
does, reports included, and returns them (`Swept`).
"""

from typing import TYPE_CHECKING

from harness.api.checked import Checked, Swept
from harness.api.run import check

if TYPE_CHECKING:
    from harness.api.matrix import sweep

__all__ = ["Checked", "Swept", "check", "sweep"]


def __getattr__(name: str) -> object:
    if name == "sweep":
        # lazy: a sweep's reports and progress (rich); `check` and marked tests need none
        from harness.api.matrix import sweep

        return sweep
    raise AttributeError(f"module 'harness.api' has no attribute {name!r}")
