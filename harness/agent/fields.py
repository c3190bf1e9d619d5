"""The agent protocol's field names, in one place (stdlib only, Python 3.6).

The host's reader (`harness/protocol/ingest.py`) and the test double import them;
`tests/agent/test_fields.py` fails when the agent writes a field not listed here.
"""

# One per line of samples.jsonl, in `"type"`; "where" only with --attribute.
RECORD_TYPES = ("header", "sample", "where", "end")

HEADER = ("type", "schema", "scenario", "params", "config", "python", "implementation",
          "platform", "machine", "hostname", "pid", "time", "env", "packages", "heap",
          "pythonmalloc", "heap_mode", "cgroup", "gpu", "gpu_reason", "cpu_count")

# Every sample: where and when, and memory bytes per source (kids: the USS of the
# processes below the agent, absent where there are none).
SAMPLE = ("type", "src", "phase", "i", "t", "rss", "rss_anon", "uss", "cgroup", "fds",
          "threads", "kids")
# Memory sources a trend is fitted to (sample key), as a result's `memory` names them.
TREND_NAMES = (("heap", "heap"), ("uss", "uss"), ("rss", "rss"), ("cgroup", "cgroup"),
               ("gpu_used", "gpu"), ("fw", "fw"), ("kids", "kids"))
# Step samples only: heap, framework bytes, collections, step times (base64 float64 s;
# older agents wrote `dt_ns`/`dt`), CPU time, cell_s (the phase's seconds that were the
# cell's own, the --budget clock: stepper.queued) and clock_s (what the clock's reads add
# to each step time, which the host takes off).
STEP = ("heap", "fw", "fw_error", "gc", "dt_b64", "cpu_s", "cell_s", "clock_s")
# User samples (src and phase "user", asuser.py): per interval the steps, their summed
# seconds, CPU time and contention.
USER = ("steps", "dt_s")
# Step samples, per interval: contention (True: an integer count).
CONTENTION = (("rq_s", False), ("ivcs", True), ("thr_s", False), ("thr_n", True),
              ("ref_s", False), ("rq_all_s", False), ("run_all_s", False), ("on_s", False))
# Where NVML answers: device memory on every sample, activity on step samples.
GPU = ("gpu_used",)
GPU_ACTIVITY = ("gpu_util", "sm_mhz", "clk_reasons")

# With --attribute, one record before the end: where the measured phase's memory and time
# went, by kind; "errors" says by kind (or "all") what could not be taken and why.
WHERE = ("type", "kinds", "calls", "frames", "heap", "stack", "ops", "device", "native",
         "errors")
WHERE_KINDS = ("heap", "stack", "ops", "device", "native")

END = ("type", "status", "error", "info", "phases", "iterations", "warmup",
       "stopped_early", "mode", "elapsed_s", "sampling_s", "teardown_error", "collected",
       "params_read", "output_dropped", "budget_spent", "memory_stop", "budget_capped",
       "rss_hwm", "cell_s", "times_s", "sampling_own_s", "as_user", "queued_out_s",
       "own_s")
# sampling_s: the measured phase's sampling cost (wall); times_s: its step-times part;
# sampling_own_s: the rest in the cell's own time (kept under stepper.SAMPLING_SHARE).
# queued_out_s: the main thread's run-queue delay outside the measured phase (the host's
# share of its start, import, setup, warmup and teardown; the measured phase's is in cell_s).
# own_s: this process's life until its end record, less its main thread's run-queue delay:
# the run's own time, which the host's wait on a busy host (spawn, pipes, exit) is not.
# as_user: the second agent's timing (asuser.py). rss_hwm: the peak RSS (VmHWM), bytes.
# memory_stop: the watchdog's safety stop (watchdog.py): rss, grew, limit, call, phase,
# or killed: True where the watchdog killed a stuck step and wrote the end record.
MEMORY_STOP = ("rss", "grew", "limit", "call", "phase", "killed")
# fault: "scenario" when the file cannot be stepped as written, never an image finding.
ERROR = ("type", "message", "traceback", "fault", "phase", "call")


def sample_fields():
    # type: () -> tuple[str, ...]
    """Every field a sample record may carry."""
    return (SAMPLE + STEP + USER + tuple(k for k, _ in CONTENTION) + GPU + GPU_ACTIVITY)
