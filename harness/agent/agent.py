"""harness agent: run a scenario, time each step, sample memory, write JSON lines.

Stdlib only, Python 3.6+, never imports harness.*. Writes schema 1 (fields.py) to --out and
stdout: "header", "sample"s, "end" (even on a raise; --attribute: "where" before it). The
scenario: setup(params) -> state and step(state), else run whole (scenariofile.py).
"""
import os
import platform
import sys
import time

# The agent's modules are imported by name from here, then leave sys.modules so a
# scenario's own `import fields` finds its module; they are byte-compiled even under
# PYTHONDONTWRITEBYTECODE=1, so the next start need not compile them.
_HERE = os.path.dirname(os.path.abspath(__file__))
_PARTS = ("fields", "readers", "writer", "scenariofile", "stepper",
          "output", "watchdog", "loop")
_NO_PYC = sys.dont_write_bytecode
sys.path.insert(0, _HERE)
sys.dont_write_bytecode = False
try:
    import fields
    from loop import run
    from watchdog import STOP_GROWTH
    from writer import Writer  # noqa: F401  (the agent's parts stay reachable by name)
finally:
    sys.dont_write_bytecode = _NO_PYC
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
    """platform.platform() without its `uname -p` process (before 3.9: platform() as is)."""
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
    """(machine, host name) from os.uname(), with no socket import and no `uname -p`."""
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
    args = read_options(argv)
    if args is None:            # not a list the host writes: argparse reads it, or says why
        args = _parser().parse_args(argv)
    problem = None
    if args.sample_every < 1 or args.iterations < 0 or args.warmup < 0:
        problem = "--sample-every must be >= 1, --iterations/--warmup >= 0"
    elif args.budget < 0 or args.budget_min < 0:
        problem = "--budget and --budget-min must be >= 0"
    elif not 0 <= args.warmup_share < 1:
        problem = "--warmup-share must be >= 0 and < 1"
    else:
        args.attribute, unknown = attribute_kinds(args.attribute)
        if unknown:
            problem = ("--attribute: unknown kind %s; the kinds are %s, or all"
                       % (", ".join(unknown), ",".join(fields.WHERE_KINDS)))
    if problem is not None:
        _parser().error(problem)
    return args


# The agent's options in --help's order: (name, type, default, argparse's other keywords);
# type str, int, float, or bool for a flag.
OPTIONS = (
    ("--scenario", str, None, {"required": True}),
    ("--params", str, "{}", {"help": "JSON object of scenario params"}),
    ("--iterations", int, 2000, {}),
    ("--warmup", int, 200, {}),
    ("--sample-every", int, 10, {}),
    ("--sample-interval", float, 0.5, {}),
    ("--out", str, None, {"help": "JSON lines file (appended, line-buffered)"}),
    ("--control", str, None, {"help": "stop measuring when this file appears"}),
    ("--budget", float, 0.0, {
        "help": "end the measured phase after this many seconds (0: none), once "
                "--budget-min steps are done; --iterations stays the cap"}),
    ("--budget-min", int, 0, {
        "help": "steps the measured phase runs before --budget can end it"}),
    ("--stop-growth", int, STOP_GROWTH, {
        "metavar": "BYTES",
        "help": "stop the run once memory grew this much after its first call (at most "
                "half the memory free then; watchdog.py); 0: never"}),
    ("--warmup-share", float, 0.0, {
        "metavar": "F",
        "help": "with --budget: the warm-up spends at most this share of the budget and "
                "the measured phase the rest (0: the warm-up runs before the budget, up "
                "to it)"}),
    ("--budget-max", float, 0.0, {
        "metavar": "S",
        "help": "with --budget: go on to --budget-min steps for at most S seconds "
                "(default: 10x the budget, 10 s at least)"}),
    ("--call-timeout", float, 0.0, {
        "metavar": "S",
        "help": "end the run when one call has not returned after S seconds (its end "
                "record says which call, and where it waits); 0: never"}),
    ("--deadline", float, 0.0, {
        "metavar": "S",
        "help": "the host's wall deadline for the whole run, S seconds from this "
                "process's start: a call under way for a second or more at 90 %% of it "
                "ends the run as --call-timeout does; 0: none"}),
    ("--as-user", float, 0.0, {
        "metavar": "S",
        "help": "after the measured phase, time S seconds of steps again in a second agent "
                "started with the user's allocator settings (asuser.py), written as phase "
                "user; 0: not"}),
    ("--no-heap", bool, False, {"help": "skip mallinfo/malloc_trim"}),
    ("--max-overhead", float, 0.01, {
        "help": "stretch the sampling interval so sampling costs at most this share of "
                "the step time (0: always every --sample-every steps)"}),
    ("--heap", str, "stock", {
        "choices": HEAP_MODES,
        "help": "quiet: a collection before each heap reading (the oldest generation "
                "too at readings 1, 2, 4, ... and the last), so free lists and cyclic "
                "garbage do not read as growth (the host also starts the cell with "
                "PYTHONMALLOC=malloc and glibc's tcache off); stock: the heap as the "
                "scenario leaves it"}),
    ("--no-gpu", bool, False, {"help": "skip NVML"}),
    ("--quiet", bool, False, {"help": "do not echo records to stdout"}),
    ("--attribute", str, "", {
        "metavar": "KINDS",
        "help": "write a where record of the measured phase: a comma list of %s, or all"
                % ",".join(fields.WHERE_KINDS)}),
    ("--no-fsync", bool, False, {
        "help": "do not sync --out to the disk at the end (a results directory thrown "
                "away after the run: harness.check's)"}),
)
_OPTIONS = dict((option[0], option) for option in OPTIONS)


class Options(object):
    """The options read (argparse's Namespace, without argparse)."""


def read_options(argv):
    """The options of `argv` as argparse would read them, without argparse's cost; None
    for anything but `--name value`/`--name=value` once each (argparse then reads it)."""
    given = {}
    at = 0
    while at < len(argv):
        name, eq, value = argv[at].partition("=")
        option = _OPTIONS.get(name)
        if option is None or name in given:
            return None
        kind = option[1]
        at += 1
        if kind is bool:
            if eq:
                return None
            given[name] = True
            continue
        if not eq:
            if at >= len(argv):
                return None
            value = argv[at]
            at += 1
        if value.startswith("-"):
            return None
        try:
            value = kind(value)
        except ValueError:
            return None
        if value not in option[3].get("choices", (value,)):
            return None
        given[name] = value
    if "--scenario" not in given:
        return None
    args = Options()
    for name, _, default, _ in OPTIONS:
        setattr(args, name[2:].replace("-", "_"), given.get(name, default))
    return args


_PARSERS = []


def _parser():
    """argparse's parser of OPTIONS, made once, for --help and saying what is wrong."""
    if _PARSERS:
        return _PARSERS[0]
    import argparse
    p = argparse.ArgumentParser(description="harness in-container agent")
    for name, kind, default, more in OPTIONS:
        if kind is bool:
            p.add_argument(name, action="store_true", **more)
        else:
            p.add_argument(name, type=None if kind is str else kind, default=default, **more)
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
