"""harness agent: run a scenario, time each step, sample memory, write JSON lines.

Stdlib only; runs on Python 3.6+ with the image's own interpreter; never imports
harness.*. Output schema 1, one JSON object per line, to --out (line-buffered) and
stdout: one "header", many "sample", one "end" (also when the scenario raises).
The record types and their fields are listed in fields.py.

A scenario defines setup(params) -> state and step(state), optionally teardown(state),
fw_bytes(state) -> int (framework allocator bytes) and info(state) -> dict. A file
without setup/step is run whole, sampled by the timer thread only.

The measured loop stops early when the --control file appears (the host's live
analysis decided; looked for at each sample and every 20 ms); the end record then says
stopped_early. With --attribute KINDS, one "where" record (what the sibling module
attribution found in the measured phase) comes just before the end record.

Each step sample also carries what the host took from the stepping thread in that
interval (contention.py): run-queue delay `rq_s`, involuntary context switches `ivcs`,
its time on a CPU `on_s`, the cgroup's throttled time `thr_s` and periods `thr_n`, the
run-queue delay and run time summed over all the process's threads
`rq_all_s`/`run_all_s`, and `ref_s`, the time of a fixed canary loop (the CPU's speed
now). Where NVML answers, step samples also carry the device's utilization `gpu_util`
(percent), SM clock `sm_mhz` and clock-event reasons `clk_reasons` (nvml.Nvml.activity).

The parts, each a module beside this one: agent.py (arguments, header, main), loop.py
(the run and its end record), stepper.py (a phase's steps and sample points),
writer.py (records as JSON lines, sample records), readers.py (memory, threads, fds),
contention.py, hooks.py (--attribute), scenariofile.py, nvml.py, fields.py (the
protocol's field names).
"""
import argparse
import os
import platform
import sys
import time

# The agent's modules sit beside this file and are imported by name, from here: run as
# a script this directory is sys.path[0] anyway; imported from the host (a test, as
# harness.agent.agent) it is there only while they are imported. Then their names leave
# sys.modules (they keep their references to each other), so that a scenario's own
# `import fields` or `import loop` finds the scenario's module, not the agent's.
_HERE = os.path.dirname(os.path.abspath(__file__))
_PARTS = ("fields", "readers", "contention", "writer", "scenariofile", "hooks", "stepper",
          "output", "watchdog", "loop")
sys.path.insert(0, _HERE)
try:
    import fields
    from loop import run
    from watchdog import STOP_GROWTH
    from writer import Writer  # noqa: F401  (the agent's parts stay reachable by name)
finally:
    sys.path.remove(_HERE)
    for _name in _PARTS:
        sys.modules.pop(_name, None)

SCHEMA = 1
HEAP_MODES = ("quiet", "stock")
ENV_KEYS = ("CUDA_VERSION", "CUDNN_VERSION", "NCCL_VERSION", "NVIDIA_TENSORFLOW_VERSION",
            "TENSORFLOW_VERSION", "NVIDIA_BUILD_ID", "NVIDIA_PYTORCH_VERSION",
            "NVIDIA_VISIBLE_DEVICES", "PYTHONMALLOC", "GLIBC_TUNABLES", "OMP_NUM_THREADS",
            "TF_CPP_MIN_LOG_LEVEL")


def installed_packages():
    """{name: version} from *.dist-info / *.egg-info on sys.path (no importlib.metadata on 3.6)."""
    found = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for pkg, version in filter(None, map(dist_info, names)):
            found.setdefault(pkg, version)
    return found


def dist_info(name):
    """(package, version) of a *.dist-info / *.egg-info directory name, or None."""
    for suffix in (".dist-info", ".egg-info"):
        if not name.endswith(suffix):
            continue
        pkg, _, version = name[: -len(suffix)].partition("-")
        if pkg and version:
            return pkg.lower().replace("_", "-"), version.split("-")[0]
    return None


def platform_name():
    """platform.platform() without the `uname -p` process it starts (a process per
    cell) for the processor's name: on Linux that name is the machine's or "unknown",
    both of which platform() leaves out (a patched uname naming the CPU model was the
    one exception). Before 3.9 platform() reads its libc from the executable and
    uname() itself runs `uname -p`: asked as before."""
    if not sys.platform.startswith("linux") or sys.version_info < (3, 9):
        return platform.platform()
    uname = os.uname()
    libc, version = platform.libc_ver()
    # platform._platform's cosmetics: joined by "-", no "unknown", no "--", none trailing
    text = "-".join(x.strip() for x in (uname.sysname, uname.release, uname.machine, "with",
                                         libc + version) if x)
    for old, new in ((" ", "_"), ("/", "-"), ("\\", "-"), (":", "-"), (";", "-"),
                     ('"', "-"), ("(", "-"), (")", "-"), ("unknown", "")):
        text = text.replace(old, new)
    while "--" in text:
        text = text.replace("--", "-")
    return text.rstrip("-")


def machine_and_host():
    """(machine, host name) from os.uname(), which platform.machine() and
    socket.gethostname() read too (no socket module to import, no `uname -p`)."""
    if not hasattr(os, "uname"):
        import socket
        return platform.machine(), socket.gethostname()
    uname = os.uname()
    return uname.machine, uname.nodename


def header(args, sampler, params):
    gpu = None
    gpu_reason = None
    if sampler.nvml is not None:
        if sampler.nvml.available:
            gpu = sampler.nvml.summary()
        else:
            gpu_reason = sampler.nvml.reason
    heap = sampler.heap
    machine, hostname = machine_and_host()
    return {"type": "header", "schema": SCHEMA, "scenario": args.scenario, "params": params,
            "config": {"iterations": args.iterations, "warmup": args.warmup,
                       "sample_every": args.sample_every, "sample_interval": args.sample_interval,
                       "budget": getattr(args, "budget", 0.0) or 0.0,
                       "budget_min": getattr(args, "budget_min", 0) or 0},
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform_name(), "machine": machine,
            "hostname": hostname, "pid": os.getpid(), "time": time.time(),
            "env": dict((k, os.environ[k]) for k in ENV_KEYS if k in os.environ),
            "packages": installed_packages(),
            "heap": {"func": heap.func if heap else None, "note": heap.note if heap else
                     "disabled"},
            "pythonmalloc": os.environ.get("PYTHONMALLOC"), "heap_mode": args.heap,
            "cgroup": sampler.cg_version, "gpu": gpu, "gpu_reason": gpu_reason,
            "cpu_count": os.cpu_count()}


def parse_args(argv):
    p = _parser()
    args = p.parse_args(argv)
    if args.sample_every < 1 or args.iterations < 0 or args.warmup < 0:
        p.error("--sample-every must be >= 1, --iterations/--warmup >= 0")
    if args.budget < 0 or args.budget_min < 0:
        p.error("--budget and --budget-min must be >= 0")
    args.attribute, unknown = attribute_kinds(args.attribute)
    if unknown:
        p.error("--attribute: unknown kind %s; the kinds are %s, or all"
                % (", ".join(unknown), ",".join(fields.WHERE_KINDS)))
    return args


_PARSERS = []


class _HelpFormatter(argparse.HelpFormatter):
    """argparse (3.8+) makes a formatter for every add_argument, to check its metavar,
    and each asks shutil for the terminal's width: an import of shutil (bz2, lzma, ...)
    and 21 asks, ~4 ms a run, for a width only --help uses. Asked here as shutil asks."""

    def __init__(self, prog):
        argparse.HelpFormatter.__init__(self, prog, width=_help_width())


def _help_width():
    """shutil.get_terminal_size().columns - 2, as HelpFormatter takes it."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


def _parser():
    """The argument parser, made once per process (a fork server's runs share the one
    its warm-up made)."""
    if _PARSERS:
        return _PARSERS[0]
    p = argparse.ArgumentParser(description="harness in-container agent",
                                formatter_class=_HelpFormatter if sys.version_info >= (
                                    3, 8) else argparse.HelpFormatter)
    p.add_argument("--scenario", required=True)
    p.add_argument("--params", default="{}", help="JSON object of scenario params")
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--sample-every", type=int, default=10)
    p.add_argument("--sample-interval", type=float, default=0.5)
    p.add_argument("--out", default=None, help="JSON lines file (appended, line-buffered)")
    p.add_argument("--control", default=None, help="stop measuring when this file appears")
    p.add_argument("--budget", type=float, default=0.0,
                   help="end the measured phase after this many seconds (0: none), "
                        "once --budget-min steps are done; --iterations stays the cap")
    p.add_argument("--budget-min", type=int, default=0,
                   help="steps the measured phase runs before --budget can end it")
    p.add_argument("--stop-growth", type=int, default=STOP_GROWTH, metavar="BYTES",
                   help="stop the run once memory grew this much after its first call (at most "
                        "half the memory free then; watchdog.py); 0: never")
    p.add_argument("--budget-max", type=float, default=0.0, metavar="S",
                   help="with --budget: go on to --budget-min steps for at most S seconds "
                        "(default: 10x the budget, 10 s at least)")
    p.add_argument("--call-timeout", type=float, default=0.0, metavar="S",
                   help="end the run when one call has not returned after S seconds "
                        "(its end record says which call, and where it waits); 0: never")
    p.add_argument("--no-heap", action="store_true", help="skip mallinfo/malloc_trim")
    p.add_argument("--max-overhead", type=float, default=0.01,
                   help="stretch the sampling interval so sampling costs at most this "
                        "share of the step time (0: always every --sample-every steps)")
    p.add_argument("--heap", choices=HEAP_MODES, default="stock",
                   help="quiet: gc.collect() before each heap reading, so free lists and "
                        "cyclic garbage do not read as growth (the host also starts the "
                        "cell with PYTHONMALLOC=malloc and glibc's tcache off); stock: "
                        "the heap as the scenario leaves it")
    p.add_argument("--no-gpu", action="store_true", help="skip NVML")
    p.add_argument("--quiet", action="store_true", help="do not echo records to stdout")
    p.add_argument("--attribute", default="", metavar="KINDS",
                   help="write a where record of the measured phase: a comma list of %s, "
                        "or all" % ",".join(fields.WHERE_KINDS))
    p.add_argument("--no-fsync", action="store_true",
                   help="do not sync --out to the disk at the end (a results directory "
                        "thrown away after the run: harness.check's)")
    _PARSERS.append(p)
    return p


def attribute_kinds(text):
    """(kinds in the protocol's order, unknown names) of a --attribute comma list."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in fields.WHERE_KINDS and n != "all"]
    wanted = fields.WHERE_KINDS if "all" in names else names
    return [k for k in fields.WHERE_KINDS if k in wanted], unknown


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run(args, header)


if __name__ == "__main__":
    sys.exit(main())
