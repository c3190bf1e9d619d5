"""The agent protocol's field names, in one place (stdlib only, Python 3.6).

The agent writes these; the host's reader (`harness/protocol/ingest.py`) and the test
double (`tests/fakeruntime.py`) import them from here, and
`tests/agent/test_fields.py` fails when the agent writes a field not listed here.
"""

# One per line of samples.jsonl, in `"type"`; "where" only with --attribute.
RECORD_TYPES = ("header", "sample", "where", "end")

HEADER = ("type", "schema", "scenario", "params", "config", "python", "implementation",
          "platform", "machine", "hostname", "pid", "time", "env", "packages", "heap",
          "pythonmalloc", "heap_mode", "cgroup", "gpu", "gpu_reason", "cpu_count")

# Every sample: where and when, and memory bytes per source. kids: the USS summed over
# the processes below the agent (a multiprocessing pool's or DataLoader's workers),
# absent where there are none (readers.Readers.kids).
SAMPLE = ("type", "src", "phase", "i", "t", "rss", "rss_anon", "uss", "cgroup", "fds",
          "threads", "kids")
# Memory sources a trend is fitted to (sample key), as a result's `memory` names them.
TREND_NAMES = (("heap", "heap"), ("uss", "uss"), ("rss", "rss"), ("cgroup", "cgroup"),
               ("gpu_used", "gpu"), ("fw", "fw"), ("kids", "kids"))
# Step samples only (read between steps on the main thread): heap, framework bytes,
# collections, step times (base64 of float64 seconds; the host reads `dt_ns` and `dt`
# from older agents and recordings as well), CPU time, and cell_s: the phase's seconds so far that were the
# cell's own (its wall time less the agent's sampling and the run-queue delay other work
# imposed: stepper.queued), the clock a --budget is spent on. clock_s: what the clock's
# own reads add to each of the sample's step times (the median of back-to-back reads,
# ~50 ns: a sixth of a 0.3 us step), which the host takes off them as it reads them.
STEP = ("heap", "fw", "fw_error", "gc", "dt_b64", "cpu_s", "cell_s", "clock_s")
# User samples (src "user", phase "user": the steps timed again as the user's interpreter
# runs them, asuser.py), per interval: the steps and their summed seconds (the clock's
# reads in them, clock_s each), with the step samples' CPU time and contention.
USER = ("steps", "dt_s")
# Step samples, per interval: contention (True: an integer count).
CONTENTION = (("rq_s", False), ("ivcs", True), ("thr_s", False), ("thr_n", True),
              ("ref_s", False), ("rq_all_s", False), ("run_all_s", False), ("on_s", False))
# Where NVML answers: device memory on every sample, activity on step samples.
GPU = ("gpu_used",)
GPU_ACTIVITY = ("gpu_util", "sm_mhz", "clk_reasons")

# With --attribute KINDS, one record just before the end: where the measured phase's
# memory and time went, by kind (the agent's attribution module); "errors" says, by
# kind (or "all"), what could not be taken and why.
WHERE = ("type", "kinds", "calls", "frames", "heap", "stack", "ops", "device", "native",
         "errors")
WHERE_KINDS = ("heap", "stack", "ops", "device", "native")

END = ("type", "status", "error", "info", "phases", "iterations", "warmup",
       "stopped_early", "mode", "elapsed_s", "sampling_s", "teardown_error", "collected",
       "params_read", "output_dropped", "budget_spent", "memory_stop", "budget_capped",
       "rss_hwm", "cell_s", "times_s", "sampling_own_s", "as_user")
# sampling_s: what the measured phase's samples cost (wall); times_s: the part of it that
# wrote the step times, which grows with the calls (~0.2-0.3 us each); sampling_own_s:
# the rest in the cell's own time (less the run-queue delay the samples met), which a
# budgeted run keeps under a tenth of cell_s (stepper.SAMPLING_SHARE).
# as_user: with --as-user, the second agent that timed the steps as the user's
# interpreter runs them (asuser.py): budget_s, seconds, calls, pythonmalloc and
# glibc_tunables as it ran, and error or skipped where it did not time them.
# rss_hwm: the agent process's peak RSS, the kernel's high-water mark (VmHWM), in bytes;
# a step's peak between two samples is in it (harness fit's lines read it).
# memory_stop: the watchdog's safety stop (watchdog.py): rss, grew and limit (bytes),
# the call and phase the run stopped in, or killed: True where the watchdog killed a
# step that did not return and wrote the end record itself.
MEMORY_STOP = ("rss", "grew", "limit", "call", "phase", "killed")
# fault: "scenario" when the scenario file cannot be stepped as written (a protocol name
# the agent cannot call), never a finding about the image; absent otherwise.
ERROR = ("type", "message", "traceback", "fault", "phase", "call")


def sample_fields():
    # type: () -> tuple[str, ...]
    """Every field a sample record may carry."""
    return (SAMPLE + STEP + USER + tuple(k for k, _ in CONTENTION) + GPU + GPU_ACTIVITY)
