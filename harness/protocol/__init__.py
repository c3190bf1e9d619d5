"""The agent protocol, host side: the JSON lines the agent (`harness/agent/agent.py`)
writes to `samples.jsonl`, read by `ingest.SeriesReader` (live or `ingest.read_samples`).

Schema 1, one JSON object per line, each with `"type"`:
- `header` (first, once, `"schema": 1`): scenario, params, config, python, platform,
  packages, heap, pythonmalloc, heap_mode, cgroup, gpu, cpu_count and the like.
- `sample`: `i`, `src` (`step`: step times and `series.CONTENTION_FIELDS`; `timer`),
  `phase`, `t`, memory bytes per source; step samples may carry
  `series.GPU_ACTIVITY_FIELDS`.
- `end` (last, once): status, error {type, message, traceback, fault}, info, phases,
  iterations, stopped_early, budget_spent, elapsed_s and the like.
Lines that do not parse or fail the schema are counted and described (`Series.skipped`,
`Series.problems`), never fatal. The full field lists: `harness/agent/fields.py`.
"""

from pathlib import Path

# The agent's code on this machine: what every runtime mounts or copies into the cell.
AGENT_DIR = Path(__file__).resolve().parent.parent / "agent"

__all__ = ["AGENT_DIR"]
