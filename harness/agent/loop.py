"""The run: a scenario's phases (import, setup, warmup, measure, teardown) or a plain
script, sampled, with an end record however it ends; --attribute hooks that never fail
the run (class Attribution). Stdlib only, 3.6+.
"""
import json
import os
import signal
import sys
import threading
import time
import traceback

from asuser import time_as_user
from output import CappedOutput
from scenariofile import (
    Params,
    ScenarioMistake,
    call_problem,
    called_wrongly,
    has_protocol,
    load_scenario,
    run_script,
)
import watchdog
from stepper import Stepper
from writer import Sampler, Writer, main_queued, process_age, timer_loop


class Terminated(Exception):
    """SIGTERM arrived: finish with an end record instead of dying silently."""


def term_handler(agent_pid):
    """SIGTERM's handler in the agent (`agent_pid`): raise `Terminated`. A forked child
    gets SIGTERM's default back (a pool worker with a handler may miss it and hang the
    pool); SIGTERM is blocked across the fork so one sent meanwhile is not lost."""
    def on_term(signum, frame):
        if os.getpid() != agent_pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated("signal %d" % signum)
    if hasattr(os, "register_at_fork"):
        if hasattr(signal, "pthread_sigmask"):
            os.register_at_fork(before=_block_term, after_in_parent=_unblock_term,
                                after_in_child=_child_term)
        else:
            os.register_at_fork(after_in_child=default_term)
    return on_term


def default_term():
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):    # not the child's main thread
        pass


_HELD = threading.local()    # the forking thread's mask before the fork blocked SIGTERM


def _block_term():
    _HELD.mask = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])


def _unblock_term():
    """The forking thread's mask as it was before the fork (SIGTERM unblocked, unless it
    was blocked already)."""
    mask = getattr(_HELD, "mask", None)
    if mask is None or signal.SIGTERM not in mask:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])


def _child_term():
    """In a forked child: SIGTERM's default back, then a SIGTERM held since the fork
    delivered (it ends the child, as it would have outside the agent)."""
    default_term()
    _unblock_term()


# ---------------------------------------------------------------- --attribute
# The hooks of `--attribute KINDS` (the sibling module `attribution`):
#     att = attribution.make(kinds, scenario_path)
#     att.measure_start(count, progress, budget, least)   # before the first measured step
#     att.at_sample(done)                  # at every sample point of the measured phase
#     rec = att.measure_end(done)          # right after the measured loop
# The first exception of a hook ends attribution for the run; the where record says why
# in errors["all"].
_HERE = os.path.dirname(os.path.abspath(__file__))
MAX_ERROR = 2000


# Its name leaves sys.modules once imported, so a scenario's module of that name is its own.
ATTRIBUTION_MODULES = ("attribution",)


def _import_attribution():
    sys.path.insert(0, _HERE)
    try:
        import attribution  # noqa: F401  (the agent's own sibling module)
    finally:
        sys.path.pop(0)
        for name in ATTRIBUTION_MODULES:
            sys.modules.pop(name, None)
    return attribution


def describe(exc):
    """'ExceptionType: message', as the where record's errors name an exception."""
    return ("%s: %s" % (type(exc).__name__, exc))[:MAX_ERROR]


class Attribution(object):
    """The attribution module's object for one run, or why there is none.

    `passthrough`: exception types a hook must not swallow (the agent's SIGTERM)."""

    def __init__(self, kinds, passthrough=()):
        self.kinds = list(kinds)
        self.passthrough = tuple(passthrough)
        self.att = None
        self.error = None
        self.record = None
        self.progress = None

    def make(self, scenario_path):
        """Import the attribution module and make its object for this scenario."""
        try:
            self.att = _import_attribution().make(self.kinds, scenario_path)
        except self.passthrough:
            raise
        except Exception as exc:
            self.error = describe(exc)

    def _call(self, name, *args):
        """The hook's result, or None once attribution failed (now or before)."""
        if self.att is None:
            return None
        try:
            return getattr(self.att, name)(*args)
        except self.passthrough:
            raise
        except Exception as exc:
            self.error = describe(exc)
            self.att = None
            return None

    def measure_start(self, count, progress, budget=0.0, least=0):
        """`budget`: the measured phase's time budget in seconds (0: `count` steps),
        `least`: the steps it makes at least."""
        self.progress = progress
        self._call("measure_start", count, progress, budget, least)

    def at_sample(self, done):
        self._call("at_sample", done)

    def measure_end(self, done):
        """Once, after the measured loop (also one that stopped early or raised)."""
        if self.progress is None or self.record is not None:
            return
        rec = self._call("measure_end", done)
        self.att = None
        if isinstance(rec, dict):
            self.record = rec
        elif self.error is None:
            self.error = "TypeError: measure_end returned %s, not a dict" % type(rec).__name__

    def finish(self):
        """measure_end for a measured phase that raised; nothing is passed through now."""
        self.passthrough = ()
        if self.progress is not None and self.record is None and self.att is not None:
            self.measure_end(self.progress())

    def where(self, why="the run ended before its measured phase"):
        """The where record to write before the end record; `why`: the reason there is
        none where attribution did not fail."""
        if self.error is None and self.record is not None:
            rec = {"type": "where", "kinds": self.kinds}
            rec.update(self.record)
            rec["type"] = "where"
            return rec
        why = self.error or why
        return {"type": "where", "kinds": self.kinds, "errors": {"all": why}}


class Run(object):
    """One run of the agent: what the end record will say, filled in as it goes."""

    def __init__(self, args, sampler, params, watch=None):
        self.args = args
        self.watch = watch
        self.sampler = sampler
        self.params = params
        self.end = {"type": "end", "status": "ok", "warmup": 0, "iterations": 0,
                    "stopped_early": False}
        self.phases = {}
        self.module = self.state = None
        self.att = Attribution(args.attribute, (Terminated,)) if args.attribute else None
        self.started = time.monotonic()
        self.queued_measure = 0.0   # the main thread's run-queue delay in the measured phase

    def scenario(self):
        if not has_protocol(self.args.scenario):
            self.end["mode"] = "script"
            self.timed("script", run_script, self.args)
            return
        if self.att is not None:
            self.att.make(self.args.scenario)
        self.module = self.timed("import", load_scenario, self.args.scenario)
        problem = call_problem(self.module, self.args.scenario)
        if problem is not None:
            raise ScenarioMistake(problem)
        self.end["mode"] = "steps"
        self.params = Params(self.params)   # notes the keys the scenario reads
        self.state = self.timed("setup", self.module.setup, self.params)
        self.sampler.state = self.state
        self.sampler.fw = getattr(self.module, "fw_bytes", None)
        self.sampler.snapshot("step", force=True, settle=True)
        stepper = Stepper(self.args, self.sampler, self.module.step, self.state, self.att,
                          self.watch)
        for phase, count in (("warmup", self.args.warmup), ("measure", self.args.iterations)):
            if stepper.memory_stop is not None:
                break   # the safety stop: no phase after the one it stopped
            stepper.start_phase(phase, count)
            t, queued = time.monotonic(), main_queued()
            done, stopped = stepper.steps(count)
            self.phases[phase] = time.monotonic() - t
            if phase == "measure" and queued is not None:
                self.queued_measure = (main_queued() or queued) - queued
            stepper.end_phase(done)
            self.end[phase if phase == "warmup" else "iterations"] = done
            self.end["stopped_early"] = stopped
        if (getattr(self.args, "as_user", 0.0) > 0 and self.end["iterations"]
                and stepper.memory_stop is None):
            # The steps timed again as the user's interpreter runs them (asuser.py).
            self.end["as_user"] = time_as_user(self.args, self.sampler, self.sampler.writer,
                                               process_age() or 0.0,
                                               self.phases.get("measure"))
        if stepper.budget_spent:
            self.end["budget_spent"] = True     # the measured phase ran its --budget
        if stepper.budget_capped:
            self.end["budget_capped"] = True    # ... and its time cap, before --budget-min
        if stepper.memory_stop is not None:
            self.end["memory_stop"] = stepper.memory_stop
        # The agent's own cost inside the measured phase, and the phase's seconds that
        # were the cell's own (less that cost and run-queue delay: the budget's clock).
        self.end["sampling_s"] = round(stepper.sampling, 6)
        self.end["times_s"] = round(stepper.times, 6)
        self.end["sampling_own_s"] = round(stepper.sampling_own, 6)
        if "measure" in self.phases:
            self.end["cell_s"] = round(max(0.0, self.phases["measure"] - stepper.lost), 6)
        if self.end["iterations"]:
            collected = self.sampler.collected()
            if collected is not None:
                self.end["collected"] = collected
        info = getattr(self.module, "info", None)
        if info is not None:
            self.end["info"] = info(self.state)

    def timed(self, phase, func, *args):
        self.sampler.phase = phase
        t = time.monotonic()
        out = func(*args)
        self.phases[phase] = time.monotonic() - t
        return out

    def failed(self, exc, name=None, message=None):
        self.end["status"] = "error"
        self.end["error"] = {"type": name or type(exc).__name__,
                             "message": (str(exc) if message is None else message)[:2000],
                             "traceback": traceback.format_exc()[-20000:],
                             "phase": self.sampler.phase}
        if self.sampler.phase in ("warmup", "measure"):
            self.end["error"]["call"] = self.sampler.steps_done + 1   # the call it failed in
        # A file the agent cannot step, or a protocol name it could not call: the
        # scenario's fault, never a finding about the image.
        called = called_wrongly(exc, sys.exc_info()[2])
        if called is not None:
            self.end["error"]["message"] = ("%s: %s could not be called as the agent calls "
                                            "it: %s" % (self.args.scenario, called,
                                                        exc))[:2000]
        if called is not None or isinstance(exc, ScenarioMistake):
            self.end["error"]["fault"] = "scenario"

    def teardown(self):
        # Later samples are not the measured phase's (teardown may free workers).
        self.sampler.phase = "teardown"
        if self.att is not None:
            self.att.finish()
        teardown = getattr(self.module, "teardown", None) if self.module is not None else None
        if teardown is None or self.state is None:
            return
        t = time.monotonic()
        try:
            teardown(self.state)
        except Exception as exc:
            self.end.setdefault("teardown_error", repr(exc)[:2000])
        self.phases["teardown"] = time.monotonic() - t

    def records(self):
        """What follows the samples: the where record (--attribute), the end record."""
        if self.att is not None:
            why = ("a plain script (no setup/step) has no measured phase"
                   if self.end.get("mode") == "script" else
                   "the run ended before its measured phase")
            yield self.att.where(why)
        self.end["phases"] = dict((k, round(v, 6)) for k, v in self.phases.items())
        if isinstance(self.params, Params):   # setup(params) ran: what it (or step) read
            self.end["params_read"] = self.params.noted()
        self.end["elapsed_s"] = round(time.monotonic() - self.started, 6)
        queued = main_queued()
        if queued is not None:  # the host's time outside the measured phase (its own is
            # in cell_s): start, import, setup, warmup, teardown
            self.end["queued_out_s"] = round(max(0.0, queued - self.queued_measure), 6)
            age = process_age()
            if age is not None:     # this process's life so far, less the host's share
                self.end["own_s"] = round(max(0.0, age - queued), 6)
        hwm = self.sampler.readers.peak_rss()
        if hwm is not None:
            self.end["rss_hwm"] = hwm
        yield self.end


def child_environment():
    """Put back the allocator settings the host set for the agent alone (HARNESS_CHILD_ENV),
    so the processes the scenario starts run as they would for a user."""
    undo = os.environ.pop("HARNESS_CHILD_ENV", None)
    try:
        values = json.loads(undo) if undo else {}
    except ValueError:
        values = {}
    for name, value in (values.items() if isinstance(values, dict) else ()):
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(value)


def start_timer(sampler, interval, call_timeout=0.0, deadline=0.0):
    """Start the timer thread (`timer_loop`); returns its stop event."""
    stop = threading.Event()
    timer = threading.Thread(target=timer_loop, args=(sampler, interval, stop,
                                                      call_timeout, deadline))
    timer.daemon = True
    timer.start()
    return stop


def run(args, make_header):
    """Run the scenario of `args`; 0 when it ended well, 1 when it raised."""
    params = json.loads(args.params) if args.params else {}
    writer = Writer(args.out, echo=not args.quiet, sync=not getattr(args, "no_fsync", False))
    sampler = Sampler(writer, heap_enabled=not args.no_heap)
    sampler.collect = args.heap == "quiet"
    if not args.no_gpu:
        sampler.start_nvml()
    writer.write(make_header(args, sampler, params))
    child_environment()     # after the header, which says what this process runs under
    # Forked before any thread of ours starts and before the scenario is imported.
    watch = watchdog.start(getattr(args, "stop_growth", 0) or 0, args.out)
    if watch is not None and hasattr(sampler.readers, "exclude_pids"):
        sampler.readers.exclude_pids.add(watch.pid)    # not the scenario's workers
    stop_timer = start_timer(sampler, args.sample_interval,
                             getattr(args, "call_timeout", 0.0) or 0.0,
                             getattr(args, "deadline", 0.0) or 0.0)
    this = Run(args, sampler, params, watch)
    signal.signal(signal.SIGTERM, term_handler(os.getpid()))
    output = CappedOutput()
    output.start()
    try:
        this.scenario()
    except SystemExit as exc:
        # A script's sys.exit(N): N != 0 is a failure the end record must say, not "ok".
        # In setup() or a step any exit is: the run ended before its calls were made.
        if this.end.get("mode") == "steps":
            this.failed(exc, "SystemExit", "%s: sys.exit(%r) during %s: a scenario's "
                        "setup() and step() return (raise an exception to fail it)"
                        % (args.scenario, exc.code, sampler.phase))
        elif exc.code not in (None, 0):
            this.failed(exc, "SystemExit", str(exc.code))
    except BaseException as exc:    # a test framework's outcomes (pytest's
        # skip and xfail) derive from BaseException: the end record names them
        this.failed(exc)
        # agent.log (the cell's stderr) shows where the scenario raised, as Python would.
        sys.stderr.write(this.end["error"]["traceback"])
        sys.stderr.flush()
    finally:
        this.teardown()
        dropped = output.stop()
        if dropped:
            this.end["output_dropped"] = dropped
        stop_timer.set()
        if watch is not None:
            watch.close()
        close_nvml(sampler)
        for record in this.records():
            write_safely(writer, record)
        writer.close()
    return 0 if this.end["status"] == "ok" else 1


def close_nvml(sampler):
    if sampler.nvml is not None:
        try:
            sampler.nvml.close()
        except Exception:
            pass


def write_safely(writer, record):
    """Write the where or end record; a where record (attribution's) that cannot be
    written as JSON is replaced by one that says why."""
    try:
        writer.write(record)
    except (TypeError, ValueError) as exc:
        if record.get("type") != "where":
            raise
        writer.write({"type": "where", "kinds": record.get("kinds"),
                      "errors": {"all": "cannot write the where record: %s: %s"
                                 % (type(exc).__name__, exc)}})
