"""The agent protocol, host side: the JSON lines the agent writes to `samples.jsonl`
(schema 1: one `header`, `sample`s, one `end`; fields in `harness/agent/fields.py`), read
by `ingest.SeriesReader`. Lines that do not parse or fail the schema are counted and
described (`Series.skipped`, `Series.problems`), never fatal.
"""

from pathlib import Path

# The agent's code on this machine: what every runtime mounts or copies into the cell.
AGENT_DIR = Path(__file__).resolve().parent.parent / "agent"

__all__ = ["AGENT_DIR"]
