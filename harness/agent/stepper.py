"""The steps of one phase, with samples between them; the measured loop stops early when
the --control file appears (end record: stopped_early). Stdlib only, Python 3.6+."""
import os
import time
from array import array

from readers import AllThreads, Contention

MIN_SAMPLES = 30
BUDGET_SAMPLES = 400
# Past its budget, a run going on to --budget-min steps samples at least this many times
# over them, so a trend's late window holds a handful.
LEAST_SAMPLES = 16
# A budgeted run goes on to --budget-min steps for at most this many times its budget
# (LEAST_CAP_S at least; the end record says budget_capped), so a slow step cannot run
# for hours. Its warm-up ends with its budget too (or at --warmup-share of it).
LEAST_CAP_FACTOR, LEAST_CAP_S = 10.0, 10.0
# A budgeted run's samples cost at most this share of the time between them.
SAMPLING_SHARE = 0.1
# The most step times a sample holds. Their block is made and touched once, so the RSS
# never moves with the calls between two samples; a full block forces a sample.
STEP_TIMES = 1 << 17
# An interval whose stepping thread waited for a CPU under this share of it prices the
# loop's own time a step (`Stepper.shares`).
QUIET_WAIT = 0.01


class ControlCheck(object):
    """Whether the host's stop file has appeared: looked at on every sample point and
    at least every INTERVAL s, so a slow step stops within a call or two."""

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
    """Steps the scenario through one phase at a time, sampling between steps: every
    `every` steps, within --max-overhead, at least MIN_SAMPLES a phase. A sample carries
    the interval's CPU time and contention; `att` (--attribute) hears of the measured
    phase's start, sample points and end."""

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
        # --budget: the measured phase ends after this many of the cell's own seconds
        # (a sample's cost and run-queue delay push deadlines back) and --budget-min
        # steps; a sample is due at least every 1/BUDGET_SAMPLES of it.
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
        self.timer_last = 0.0   # the timer thread's CPU seconds at the last sample
        self.loop_s = None      # the loop's own seconds a step (`shares`), once priced
        self.clock_s = 0.0      # what the clock's reads add to a step time (clock_cost)
        self.cost = 0.0         # what the last sample cost (its step times' part too)
        self.sampling = 0.0     # what this phase's samples cost
        self.times = 0.0        # ... of which writing the step times (estimated)
        self.sampling_own = 0.0     # ... in the cell's own time, the step times apart
        self.samples = 0        # this phase's step samples
        self.lost = 0.0         # this phase's seconds that were not the cell's (cell_time)
        self.ended = 0.0        # when the last sample (or the phase's start) ended
        # Made by repeating one zero, which touches every page and frees nothing: a
        # freed MiB would raise glibc's mmap threshold and change the step's allocations.
        self.times_block = array("d", [0.0]) * STEP_TIMES

    def start_phase(self, phase, count):
        """Start a phase: attribution first (measured phase), then the interval."""
        self.sampler.phase = phase
        self.measuring = phase == "measure"
        if self.measuring and self.att is not None:
            base = self.sampler.steps_done
            self.att.measure_start(count, lambda: self.sampler.steps_done - base,
                                   self.run_budget, self.budget_min)
        self.cost = self.sampling = self.lost = self.times = 0.0
        self.sampling_own = 0.0
        self.samples = 0
        self.clock_s = clock_cost(self.clock)
        self.started = self.ended = self.clock()
        self.cpu_last = self.cpu_clock()
        self.timer_last = getattr(self.sampler, "timer_cpu", 0.0)
        self.cont_last = self.contention.read()
        self.threads.interval(self.clock())

    def end_phase(self, done):
        if self.measuring and self.att is not None:
            # No call is under way while attribution reads its parts: the call timer
            # must not end the run for it.
            self.sampler.phase = "attributed"
            self.att.measure_end(done)

    def steps(self, count):
        """Run `count` steps; (steps done, whether the control file stopped them)."""
        step, state, clock, sampler = self.step, self.state, self.clock, self.sampler
        every, control, measuring = self.every, self.control, self.measuring
        # Sampling stacks, the stop file is checked on its timer alone: a stat hands the
        # GIL over, and the sampler would catch the check instead of the step.
        attributing = self.att is not None and "stack" in self.att.kinds
        cap = max(every, count // MIN_SAMPLES)
        # The step times since the last sample, in one block made once (a list would
        # move the heap, an array grown as they come the RSS).
        dts = self.times_block
        times = memoryview(dts)
        done = gap = 0      # steps done, steps since the last sample
        since = 0.0         # step seconds since the last sample
        budgeted = measuring and self.run_budget > 0
        started = clock()
        share = self.warmup_share
        lost0 = self.lost
        ends_at = (started + self.run_budget - min(self.warmed, share * self.run_budget)
                   if budgeted else float("inf"))
        hard_end = (started + (self.budget_max or max(LEAST_CAP_FACTOR * self.run_budget,
                                                      LEAST_CAP_S))
                    if budgeted else float("inf"))
        warmup_ends = (started + (share or 1.0) * self.run_budget
                       if not measuring and self.run_budget > 0 else float("inf"))
        least = self.budget_min
        every_s = self.run_budget / BUDGET_SAMPLES if budgeted else float("inf")
        lost = self.lost     # the deadlines above move back by what is lost after now
        applied = 0.0        # ... some of it already, since the last sample (queued_since)
        watch = self.watch
        while done < count:
            t1 = clock()
            step(state)
            t2 = clock()
            dts[gap] = t2 - t1
            gap += 1
            done += 1
            sampler.steps_done += 1
            if watch is not None and watch.base is None:
                # Growth counts from after the first call, which may build a context or
                # compile once (watchdog.py).
                watch.arm(sampler.readers.rss())
            if watch is not None and watch.tripped is not None:
                self.memory_stop = dict(watch.tripped, call=sampler.steps_done,
                                        phase=sampler.phase)
                self.sample(times[:gap], done, True, since + t2 - t1)
                return done, False
            since += t2 - t1
            # The control file is also checked on a timer: a live decision stops the
            # run within a few calls.
            point = done % every == 0
            stop_now = measuring and control.due(t2, point and not attributing)
            over = t2 >= ends_at
            if over and budgeted:
                # Take the delay queued since the last sample first, or a busy host's
                # sparse samples would end the run short of its budget.
                queued_now = self.queued_since()
                if queued_now > applied:
                    ends_at += queued_now - applied
                    hard_end += queued_now - applied
                    applied = queued_now
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
                # Past the budget, on to --budget-min: sample evenly in steps, so fast
                # steps after slow ones are read too.
                cap = max(every, least // LEAST_SAMPLES)
            full = gap == STEP_TIMES
            if not (stop_now or point or full or done == count):
                continue
            due = since * self.budget >= self.cost or since >= every_s
            if due and budgeted:
                cell_now = t2 - started - self.lost - self.queued_since()
            # The samples' mean cost prices the next one, not one slow sample.
            if due and budgeted and self.samples and (
                    self.sampling_own * (self.samples + 1) / self.samples
                    > SAMPLING_SHARE * cell_now
            ) and self.samples >= MIN_SAMPLES * cell_now / self.run_budget:
                # Keep a budgeted run's samples within SAMPLING_SHARE once it has
                # MIN_SAMPLES in step with its budget ...
                due = False
            # ... but for the MIN_SAMPLES a run its cap on calls ends still reads
            due = due or gap >= cap or full
            if stop_now or done == count or due:
                self.sample(times[:gap], done, done == count, since)
                since = 0.0
                gap = 0
                if self.lost > lost:
                    moved, lost = self.lost - lost - applied, self.lost
                    ends_at += moved
                    hard_end += moved
                    warmup_ends += moved
                applied = 0.0
            if stop_now:
                return done, True
        if not measuring:
            self.warmed = clock() - started - (self.lost - lost0)
        return done, False

    def queued_since(self):
        """The stepping thread's run-queue delay since the last sample (a pread)."""
        now, last = self.contention.queued(), self.cont_last[0] if self.cont_last else None
        return now - last if now is not None and last is not None else 0.0

    def shares(self, wall, stepped, rq, steps):
        """(The steps' share of the interval's CPU time, the share of its run-queue delay
        that fell within steps.) The loop's own time between steps is the agent's, not
        the step's; a wait for a CPU is neither's CPU time. Once the loop's own seconds a
        step are priced (`loop_s`: the least of the intervals whose stepping thread waited
        under QUIET_WAIT of them), and where that thread's run-queue delay `rq` is read,
        the CPU share is the steps' share of the time the thread did not wait, and a wait
        is within steps by as much as the steps' seconds exceed that time less the
        loop's: a busy host's preemption, between steps or within one, moves neither.
        Else both are the steps' share of the wall clock (a wait between steps then cuts
        the interval's CPU time per step)."""
        if stepped is None or wall <= 0:
            return 1.0, 1.0
        read = rq is not None and rq >= 0
        if read and steps and rq <= QUIET_WAIT * wall:
            per = max(0.0, wall - stepped) / steps
            self.loop_s = per if self.loop_s is None else min(self.loop_s, per)
        if not read or self.loop_s is None:
            share = min(1.0, stepped / wall)
            return share, share
        within = min(rq, max(0.0, stepped - (wall - rq) + self.loop_s * steps))
        ran = wall - rq
        share = min(1.0, max(0.0, stepped - within) / ran) if ran > 0 else 1.0
        return share, (within / rq if rq > 0 else share)

    def sample(self, dts, done, last=False, stepped=None):
        """Write one step sample: `dts` the step times since the last, `done` steps done,
        `last` the phase's last (it settles the heap), `stepped` the steps' own seconds.

        CPU, on-CPU, run-queue delay and throttled time are the interval's (less the timer
        thread's CPU) at the steps' share of its wall time: the loop's checks are the agent's."""
        clock = self.clock
        t = clock()
        cpu_now = self.cpu_clock()
        timer_now = getattr(self.sampler, "timer_cpu", 0.0)
        cont_now = self.contention.read()
        ref = Contention.canary(clock)
        rq_all, run_all = self.threads.interval(t)
        extra = Contention.delta(cont_now, self.cont_last, ref)
        extra["rq_all_s"] = round(rq_all, 9)
        extra["run_all_s"] = round(run_all, 9)
        extra["clock_s"] = round(self.clock_s, 9)
        wall = t - self.ended
        if stepped is not None:     # the steps' own seconds: less the clock's reads
            stepped = max(0.0, stepped - len(dts) * self.clock_s)
        share, within = self.shares(wall, stepped, extra.get("rq_s"), len(dts))
        cpu = max(0.0, cpu_now - self.cpu_last - (timer_now - self.timer_last)) * share
        if "on_s" in extra:
            extra["on_s"] = round(extra["on_s"] * share, 9)
        delay = queued(wall, extra.get("rq_s") or 0.0, rq_all, run_all)
        self.lost += delay
        extra["cell_s"] = round(t - self.started - self.lost, 6)
        # Run-queue delay and throttled time within the steps (the host subtracts them
        # from step times); the budget's clock above takes the whole interval's.
        for key in ("rq_s", "thr_s"):
            if key in extra:
                extra[key] = round(extra[key] * within, 9)
        self.sampler.snapshot("step", dts, cpu=cpu, extra=extra, settle=last)
        if self.measuring and self.att is not None:
            self.att.at_sample(done)
        self.cont_last = self.contention.read()
        self.cpu_last = self.cpu_clock()  # the sample's own CPU is left out
        spent = self.cpu_last - cpu_now
        self.timer_last = getattr(self.sampler, "timer_cpu", 0.0)
        self.ended = clock()
        self.cost = self.ended - t
        self.sampling += self.cost
        self.times += self.sampler.dt_cost
        self.lost += self.cost
        # The sample's cost in the cell's own time: less its run-queue delay and the
        # step times' writing, and at most the CPU time it took. A wait for the GIL behind
        # another of the agent's threads, which a CPU quota throttled, is no run-queue
        # delay of this thread: beside a 1/7 quota a leak's samples read 0.4 s of 0.42.
        waited = (self.cont_last[0] - cont_now[0]
                  if self.cont_last[0] is not None and cont_now[0] is not None else 0.0)
        self.sampling_own += min(max(0.0, self.cost - waited - self.sampler.dt_cost),
                                 max(0.0, spent))
        self.samples += 1


def clock_cost(clock, reads=201):
    """What the clock's own reads add to a step time: the median of `reads` back-to-back
    pairs (not negligible against a sub-microsecond step)."""
    gaps = []
    for _ in range(reads):
        t1 = clock()
        t2 = clock()
        gaps.append(t2 - t1)
    gaps.sort()
    return gaps[len(gaps) // 2]


def queued(wall, rq_self, rq_all, run_all):
    """Seconds of a `wall` s interval the cell waited for a CPU held by other work: the
    average runnable thread's run-queue delay, at least the stepping thread's own (so a
    pool it waits on counts). Not CPU time: a waiting step would never spend its budget."""
    if wall <= 0:
        return 0.0
    runnable = max(1.0, (rq_all + run_all) / wall)
    return min(wall, max(rq_self, rq_all / runnable))
