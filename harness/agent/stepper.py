"""The steps of one phase, with samples between them.

The measured loop stops early when the --control file appears (the host's live
analysis decided; looked for at each sample point and every 20 ms); the end record then
says stopped_early. Stdlib only, Python 3.6+.
"""
import os
import time
from array import array

from contention import AllThreads, Contention

MIN_SAMPLES = 30
BUDGET_SAMPLES = 400
# Past its budget, a run going on to --budget-min steps reads at least this many times
# over those steps: a third of them (a trend's late window) holds a handful.
LEAST_SAMPLES = 16
# A budgeted run goes on past its budget to --budget-min steps for at most this many
# times its budget (and LEAST_CAP_S at least): a step of seconds would otherwise run for
# hours to make them (its end record says budget_capped). Its warm-up ends with its
# budget too (at least one step); with --warmup-share F, at F of its budget, and the
# measured phase spends the rest (harness.check, the pytest plugin: a marked test costs
# its budget; a warm-up of 200 calls of 3 ms before a 0.5 s budget cost it twice).
LEAST_CAP_FACTOR, LEAST_CAP_S = 10.0, 10.0


class ControlCheck(object):
    """Whether the host's stop file has appeared: looked at on every sample point and
    at least every INTERVAL s between them, so a slow step stops within a call or two.

    A stat costs ~2 us; the clock comparison made on every step costs ~0.1 us."""

    INTERVAL = 0.02

    def __init__(self, path):
        self.path = path
        self.next_at = 0.0

    def due(self, now, sample_point=False):
        if not self.path or (now < self.next_at and not sample_point):
            return False
        self.next_at = now + self.INTERVAL
        return os.path.exists(self.path)


class Stepper(object):
    """Steps the scenario through one phase at a time, sampling between steps.

    Samples every `every` steps, but no more often than keeps the agent's own cost under
    --max-overhead of the step time, and never so rarely that a phase yields fewer than
    MIN_SAMPLES samples. Each step sample carries the process CPU time of its interval
    (a real slowdown, more work, from a busy host, same work and less CPU: contention
    stretches wall time only; read at sample points, not per step, as it is a syscall)
    and the contention the stepping thread met (contention.py).

    With --attribute, `att` (hooks.Attribution) hears of the measured phase: its start,
    each sample point (at_sample counts as the sample's cost) and its end.
    """

    def __init__(self, args, sampler, step, state, att=None, watch=None):
        self.sampler = sampler
        # The safety stop (watchdog.py): its `tripped` is looked at after every step.
        self.watch = watch
        self.memory_stop = None
        self.step = step
        self.state = state
        self.att = att
        self.every = args.sample_every
        self.budget = args.max_overhead if args.max_overhead > 0 else float("inf")
        # The measured phase's time budget (--budget): it ends once this many seconds
        # have passed and at least --budget-min steps were done; a sample is due at
        # least every 1/BUDGET_SAMPLES of it, so a run of cheap steps gives readings
        # across its whole length, not a sample cap's worth.
        self.run_budget = getattr(args, "budget", 0.0) or 0.0
        self.budget_min = getattr(args, "budget_min", 0) or 0
        self.budget_max = getattr(args, "budget_max", 0.0) or 0.0
        self.budget_spent = False
        self.budget_capped = False      # the cap on time cut the --budget-min steps short
        self.warmup_cut = False         # the budget ended the warm-up before its steps
        self.warmup_share = getattr(args, "warmup_share", 0.0) or 0.0
        self.warmed = 0.0               # the warm-up's seconds, its measured phase's less
        self.control = ControlCheck(args.control)
        self.contention = Contention()
        self.threads = AllThreads()
        self.clock = time.perf_counter
        self.cpu_clock = time.process_time
        self.measuring = False
        self.cpu_last = self.cont_last = None
        self.cost = 0.0         # what the last sample cost
        self.sampling = 0.0     # what this phase's samples cost

    def start_phase(self, phase, count):
        """Start a phase: attribution first (measured phase), then the interval."""
        self.sampler.phase = phase
        self.measuring = phase == "measure"
        if self.measuring and self.att is not None:
            base = self.sampler.steps_done
            self.att.measure_start(count, lambda: self.sampler.steps_done - base,
                                   self.run_budget, self.budget_min)
        self.cost = self.sampling = 0.0
        self.cpu_last = self.cpu_clock()
        self.cont_last = self.contention.read()
        self.threads.interval(self.clock())

    def end_phase(self, done):
        if self.measuring and self.att is not None:
            self.att.measure_end(done)

    def steps(self, count):
        """Run `count` steps; (steps done, whether the control file stopped them)."""
        step, state, clock, sampler = self.step, self.state, self.clock, self.sampler
        every, control, measuring = self.every, self.control, self.measuring
        # Sampling stacks, the stop file is looked at on its timer alone: a stat every few
        # steps of microseconds hands the GIL over there, and the stack sampler, which
        # waits for it, sampled the agent's check instead of the step, nearly every time.
        attributing = self.att is not None and "stack" in self.att.kinds
        cap = max(every, count // MIN_SAMPLES)
        # The step times since the last sample, 8 bytes each in one block, which the
        # heap reading leaves out (writer.own_bytes): a list of floats cost ~40 bytes a
        # call in the heap itself, so a cheap step's readings rose and fell by MiBs with
        # the calls between two samples (issue 63).
        dts = array("d")
        done = gap = 0      # steps done, steps since the last sample
        since = 0.0         # step seconds since the last sample
        budgeted = measuring and self.run_budget > 0
        started = clock()
        share = self.warmup_share
        ends_at = (started + self.run_budget - min(self.warmed, share * self.run_budget)
                   if budgeted else float("inf"))
        hard_end = (started + (self.budget_max or max(LEAST_CAP_FACTOR * self.run_budget,
                                                      LEAST_CAP_S))
                    if budgeted else float("inf"))
        warmup_ends = (started + (share or 1.0) * self.run_budget
                       if not measuring and self.run_budget > 0 else float("inf"))
        least = self.budget_min
        every_s = self.run_budget / BUDGET_SAMPLES if budgeted else float("inf")
        watch = self.watch
        while done < count:
            t1 = clock()
            step(state)
            t2 = clock()
            dts.append(t2 - t1)
            done += 1
            sampler.steps_done += 1
            if watch is not None and watch.base is None:
                # Growth counts from after the run's first call: it may build a CUDA
                # context, compile (XLA, a graph) or fill a framework's pools once, by
                # hundreds of MiB (JAX's first call on an H200: 768 MiB); until then
                # only half the memory free at the start stops it (watchdog.py).
                watch.arm(sampler.readers.rss())
            if watch is not None and watch.tripped is not None:
                self.memory_stop = dict(watch.tripped, call=sampler.steps_done,
                                        phase=sampler.phase)
                self.sample(dts, done, True)
                return done, False
            since += t2 - t1
            gap += 1
            # The control file is looked at on a timer too, so a live decision stops
            # the run within a few calls, not at the next sample.
            point = done % every == 0
            stop_now = measuring and control.due(t2, point and not attributing)
            over = t2 >= ends_at
            spent = over and (done >= least or t2 >= hard_end)
            if spent:
                self.budget_spent = True
                self.budget_capped = done < least
                count = done
            elif t2 >= warmup_ends and done < count:
                self.warmup_cut = True
                count = done
            elif over and cap > least // LEAST_SAMPLES:
                # The budget is spent, the run goes on to --budget-min steps: read those
                # evenly in steps, not in time, so fast steps after slow ones (a cache's
                # hits after its misses) are read too.
                cap = max(every, least // LEAST_SAMPLES)
            if not (stop_now or point or done == count):
                continue
            if (stop_now or done == count or since * self.budget >= self.cost or gap >= cap
                    or since >= every_s):
                self.sample(dts, done, done == count)
                dts = array("d")
                since = 0.0
                gap = 0
            if stop_now:
                return done, True
        if not measuring:
            self.warmed = clock() - started
        return done, False

    def sample(self, dts, done, last=False):
        """Write one step sample; `last`: the phase's last (it settles the heap)."""
        clock = self.clock
        t = clock()
        cpu_now = self.cpu_clock()
        cont_now = self.contention.read()
        ref = Contention.canary(clock)
        rq_all, run_all = self.threads.interval(t)
        extra = Contention.delta(cont_now, self.cont_last, ref)
        extra["rq_all_s"] = round(rq_all, 9)
        extra["run_all_s"] = round(run_all, 9)
        self.sampler.snapshot("step", dts, cpu=cpu_now - self.cpu_last, extra=extra,
                              settle=last)
        if self.measuring and self.att is not None:
            self.att.at_sample(done)
        self.cost = clock() - t
        self.cpu_last = self.cpu_clock()  # the sample's own CPU is left out
        self.cont_last = self.contention.read()
        self.sampling += self.cost
