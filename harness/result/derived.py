"""What a derived answer rests on: the run keys of the cells it was made from.

An answer made from cells (explain's where and its Change rows, a pair's first bad and
last good) outlives them on disk: a `--resume` after an edit runs a cell again in its
place, a result.json is cut short, a directory is copied. `DerivedFrom` keeps, per cell
the answer rests on, a digest of that cell's `CellResult.key` (`result.runkey`) as it
was when the answer was made; `changed` names the cells that no longer are what it
rested on. The report model checks every derived answer once, when it is assembled
(`report.model.Report.from_results`), so no renderer shows one beside other cells.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from harness.result.codec import JSON, encode
from harness.result.model import CellResult

__all__ = ["DerivedFrom", "key_digest"]


def key_digest(result: CellResult) -> str:
    """The cell's run key as a short digest; a result recorded before keys answers by
    its verdict and reason instead (all that tells one such run from another)."""
    said: JSON = (encode(result.key) if result.key is not None
                  else {"before keys": [result.verdict, result.reason]})
    text = json.dumps(said, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class DerivedFrom:
    """Cell id -> the digest of the run key the answer was made from."""

    keys: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Mapping[str, CellResult], cells: Iterable[str | None]
           ) -> DerivedFrom:
        """The answer rests on `cells` as `results` hold them now."""
        return cls({cid: key_digest(results[cid]) for cid in cells
                    if cid is not None and cid in results})

    def changed(self, results: Mapping[str, CellResult]) -> list[str]:
        """The cells the answer rests on that are missing, unreadable or ran again
        since (another run key); empty while the answer holds."""
        return sorted(cid for cid, digest in self.keys.items()
                      if cid not in results or key_digest(results[cid]) != digest)

    def to_json(self) -> dict[str, JSON]:
        return {cid: digest for cid, digest in sorted(self.keys.items())}

    @classmethod
    def from_json(cls, data: object) -> DerivedFrom | None:
        """None where nothing was recorded (an answer written before provenance)."""
        if not isinstance(data, dict) or not data:
            return None
        return cls({str(k): str(v) for k, v in data.items()})
