"""The agent protocol, host side: the JSON lines the in-container agent
(`harness/agent/agent.py`) writes to `samples.jsonl`, read by `ingest.SeriesReader`
(while the cell runs in live mode, else through `ingest.read_samples`).

Schema 1, one JSON object per line, each with `"type"`:
- `header` (first, once, `"schema": 1`): scenario, params, config, python,
  implementation, platform, machine, hostname, pid, time, env, packages, heap,
  pythonmalloc, heap_mode (quiet|stock), cgroup, gpu, gpu_reason, cpu_count.
- `sample`: `i` (iteration), `src` (`step`: carries `dt`, the step times, and the
  contention fields of `series.CONTENTION_FIELDS`; `timer`: a timed reading), `phase`
  (warmup|measure|...), `t` (seconds), and memory bytes per source (heap, uss, rss,
  cgroup, gpu_used, fw); where NVML answered, step samples also carry the device's
  `gpu_util` (percent), `sm_mhz` and `clk_reasons` (`series.GPU_ACTIVITY_FIELDS`).
- `end` (last, once): status (ok|error), error {type, message, traceback, fault:
  "scenario" when the agent could not call the scenario as written}, info,
  phases, iterations, warmup, stopped_early, budget_spent, mode, elapsed_s, sampling_s.
Lines that do not parse or fail the schema (`ingest.checked`) are counted and described
(`Series.skipped`, `Series.problems`, `series.Series` the whole), never fatal.
"""

from pathlib import Path

# The agent's code on this machine: what every runtime mounts or copies into the cell.
AGENT_DIR = Path(__file__).resolve().parent.parent / "agent"

__all__ = ["AGENT_DIR"]
