"""The cases of benchmarks/vs_psleak.py: pinned releases with a known, fixed C-level leak.

Each leak was found in the upstream tracker and measured (heap B/call after gc.collect
and malloc_trim, N=5000 calls): multidict 6.6.3 5984 vs 6.6.4 0 (aio-libs/multidict
#1232, fix PR #1233); msgspec 0.14.1 1570 vs 0.14.2 0 (msgspec PR #380, fixes #379);
ujson 5.12.0 593 vs 5.12.1 1 (ultrajson #631, fix PR #714). Controls: the stdlib json
round-trip, and msgspec 0.14.1 decoding a 16-tuple (the leaking release, a clean call).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    name: str
    scenario: str                      # file in benchmarks/cases/ or examples/scenarios/
    requirement: str | None            # pip requirement of the venv, None: stdlib only
    leaks: bool
    params: dict[str, object] = field(default_factory=dict)
    note: str = ""


CASES = (
    Case("multidict 6.6.3 pop", "multidict_pop.py", "multidict==6.6.3", True,
         note="~6 KB/call"),
    Case("multidict 6.6.4 pop", "multidict_pop.py", "multidict==6.6.4", False),
    Case("msgspec 0.14.1 20-tuple", "msgspec_tuple.py", "msgspec==0.14.1", True,
         note="~1.5 KB/call"),
    Case("msgspec 0.14.2 20-tuple", "msgspec_tuple.py", "msgspec==0.14.2", False),
    Case("ujson 5.12.0 default=repr", "ujson_default.py", "ujson==5.12.0", True,
         note="~600 B/call"),
    Case("ujson 5.12.1 default=repr", "ujson_default.py", "ujson==5.12.1", False),
    Case("control: msgspec 0.14.1 16-tuple", "msgspec_tuple.py", "msgspec==0.14.1", False,
         {"length": 16}),
    Case("control: stdlib json", "json_control.py", None, False),
)
