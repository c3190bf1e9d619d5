"""`Record`, the base of the analysis's frozen result records (`trends`, `vsbaseline`,
`records.Finding`): how one turns into JSON for `result.json`."""

from __future__ import annotations

from dataclasses import asdict


class Record:
    """A frozen result record: `to_dict` gives its fields as a JSON-ready dict;
    `json_extra` what the stored form adds for a reader (derived values)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = asdict(self)  # type: ignore[call-overload]
        return out

    def json_extra(self) -> dict[str, object]:
        return {}
