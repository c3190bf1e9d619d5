"""The steps of one phase, with samples between them.

The measured loop stops early when the --control file appears (the host's live
analysis decided; looked for at each sample point and every 20 ms); the end record then
says stopped_early. Stdlib only, Python 3.6+.
"""
import os
import time
from array import array

from readers import AllThreads, Contention

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
# A budgeted run's samples cost at most this share of the time between them, whatever the
# step's length: a sample (a full collection under --heap quiet, the USS of the workers)
# costs ~1-5 ms, and 400 of them over a 5 s budget once took 2.4 s of it (issue 78).
SAMPLING_SHARE = 0.1
# The most step times a sample holds: the block they are kept in is made, and its pages
# touched, once, before the first call, so the RSS never moves with the calls between
# two samples (a busy host that spaced a cheap step's samples 26,000 calls apart grew a
# growing array's RSS by 1.1-1.7 MiB, kept: a `plateau` of the agent's own, in one run
# of two). A sample is taken once it is full (1 MiB), whatever SAMPLING_SHARE says: at
# 1 << 15 a 1 us step filled it 30 times a second, and at a CI's load of ~13 samples of
# 13 ms took 0.66 s of a 1 s budget.
STEP_TIMES = 1 << 17


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
    and the contention the stepping thread met (readers.Contention).

    With --attribute, `att` (loop.Attribution) hears of the measured phase: its start,
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
        # across its whole length, not a sample cap's worth. Its seconds are the cell's
        # own (`lost` below): a sample's cost and the run-queue delay the host's other
        # work imposed push every deadline back, so a busy host stretches the wall
        # clock, not the evidence.
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
        self.clock_s = 0.0      # what the clock's reads add to a step time (clock_cost)
        self.cost = 0.0         # what the last sample cost (its step times' part too)
        self.sampling = 0.0     # what this phase's samples cost
        self.times = 0.0        # ... of which writing the step times (estimated)
        self.sampling_own = 0.0     # ... in the cell's own time, the step times apart
        self.samples = 0        # this phase's step samples
        self.lost = 0.0         # this phase's seconds that were not the cell's (cell_time)
        self.ended = 0.0        # when the last sample (or the phase's start) ended
        # (See STEP_TIMES.) Made by repeating one zero, which writes every page and frees
        # nothing: from bytes(8 * STEP_TIMES), a MiB freed raised glibc's mmap threshold
        # for the rest of the run, and a step whose buffers of MiBs the allocator then
        # kept in its heap ran 2.3x faster than in the user's process (urllib3 2.0's
        # gzip reads: 2.3 ms against 5.4 ms, the pages of its buffers faulted in anew
        # each call there).
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
            # no call is under way while attribution reads its parts (the workers'
            # answers take seconds): the call timer must not end the run for it
            self.sampler.phase = "attributed"
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
        # The step times since the last sample, 8 bytes each in one block made once (a
        # list of floats cost ~40 bytes a call in the heap itself, so a cheap step's
        # readings rose and fell by MiBs with the calls between two samples, issue 63;
        # an array grown as they came, the RSS: STEP_TIMES).
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
                # Growth counts from after the run's first call: it may build a CUDA
                # context, compile (XLA, a graph) or fill a framework's pools once, by
                # hundreds of MiB (JAX's first call on an H200: 768 MiB); until then
                # only half the memory free at the start stops it (watchdog.py).
                watch.arm(sampler.readers.rss())
            if watch is not None and watch.tripped is not None:
                self.memory_stop = dict(watch.tripped, call=sampler.steps_done,
                                        phase=sampler.phase)
                self.sample(times[:gap], done, True, since + t2 - t1)
                return done, False
            since += t2 - t1
            # The control file is looked at on a timer too, so a live decision stops
            # the run within a few calls, not at the next sample.
            point = done % every == 0
            stop_now = measuring and control.due(t2, point and not attributing)
            over = t2 >= ends_at
            if over and budgeted:
                # The delay queued since the last sample, before the deadline is taken:
                # samples are sparse on a busy host, and the last interval's wait would
                # otherwise end the run short of its budget.
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
                # The budget is spent, the run goes on to --budget-min steps: read those
                # evenly in steps, not in time, so fast steps after slow ones (a cache's
                # hits after its misses) are read too.
                cap = max(every, least // LEAST_SAMPLES)
            full = gap == STEP_TIMES
            if not (stop_now or point or full or done == count):
                continue
            due = since * self.budget >= self.cost or since >= every_s
            if due and budgeted:
                # the cell's seconds so far, the delay queued since the last sample too
                cell_now = t2 - started - self.lost - self.queued_since()
            # The mean cost of the samples so far prices the next one: a single sample
            # that waited on the GIL (the timer thread's reading) would otherwise space
            # the next ones far apart.
            if due and budgeted and self.samples and (
                    self.sampling_own * (self.samples + 1) / self.samples
                    > SAMPLING_SHARE * cell_now
            ) and self.samples >= MIN_SAMPLES * cell_now / self.run_budget:
                # A budgeted run's samples stay within SAMPLING_SHARE, once it has read
                # MIN_SAMPLES in step with its budget (a short budget of a heavy process:
                # a marked test's 0.5 s read 10 times had too few to decide) ...
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

    def sample(self, dts, done, last=False, stepped=None):
        """Write one step sample; `last`: the phase's last (it settles the heap);
        `stepped`: the seconds its steps took (their times' sum, the clock's reads in
        them: `clock_cost`).

        Its CPU time is the steps' own: the process's CPU time of the interval less the
        timer thread's (the agent's readings off this thread), and of the rest the share
        the steps took of the interval's wall time (the loop's clock reads and checks
        between steps are the agent's: for a step of a microsecond as long as the step;
        and an interval's share of the wall is its share of the CPU, whatever waited).
        The stepping thread's time on a CPU (`on_s`), its run-queue delay (`rq_s`) and
        the cgroup's throttled time (`thr_s`) are taken at that share too."""
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
        share = min(1.0, stepped / wall) if stepped is not None and wall > 0 else 1.0
        cpu = max(0.0, cpu_now - self.cpu_last - (timer_now - self.timer_last)) * share
        if "on_s" in extra:
            extra["on_s"] = round(extra["on_s"] * share, 9)
        delay = queued(wall, extra.get("rq_s") or 0.0, rq_all, run_all)
        self.lost += delay
        extra["cell_s"] = round(t - self.started - self.lost, 6)
        # The run-queue delay and throttled time the steps met: the interval's, at the
        # steps' share of it (the host subtracts it from their times: the whole
        # interval's, as long again for a microsecond's step, took a busy host's rounds
        # of it to nothing). The budget's clock above takes the whole interval's.
        for key in ("rq_s", "thr_s"):
            if key in extra:
                extra[key] = round(extra[key] * share, 9)
        self.sampler.snapshot("step", dts, cpu=cpu, extra=extra, settle=last)
        if self.measuring and self.att is not None:
            self.att.at_sample(done)
        self.cont_last = self.contention.read()
        self.cpu_last = self.cpu_clock()  # the sample's own CPU is left out
        self.timer_last = getattr(self.sampler, "timer_cpu", 0.0)
        self.ended = clock()
        self.cost = self.ended - t
        self.sampling += self.cost
        self.times += self.sampler.dt_cost
        self.lost += self.cost
        # What the sample cost the cell in its own time: its wall time less the run-queue
        # delay it met and the step times' writing, which grows with the calls.
        waited = (self.cont_last[0] - cont_now[0]
                  if self.cont_last[0] is not None and cont_now[0] is not None else 0.0)
        self.sampling_own += max(0.0, self.cost - waited - self.sampler.dt_cost)
        self.samples += 1


def clock_cost(clock, reads=201):
    """What the clock's own reads add to a step time taken between two of them: the
    median of `reads` back-to-back pairs (~50 ns on a 2020s x86 core, a sixth of a 0.3 us
    step, which would read 1.17x its own time and a 1.5x slowdown of it 1.43x)."""
    gaps = []
    for _ in range(reads):
        t1 = clock()
        t2 = clock()
        gaps.append(t2 - t1)
    gaps.sort()
    return gaps[len(gaps) // 2]


def queued(wall, rq_self, rq_all, run_all):
    """Seconds of an interval of `wall` s that the cell waited for a CPU the host's other
    work held: the run-queue delay of its average runnable thread (all its threads' delay
    over how many were runnable on average, at least one), and at least the stepping
    thread's own. Single-threaded work gets its own delay exactly; a pool's (TF's
    intra-op threads, BLAS), where the stepping thread waits on workers that queue, gets
    theirs; a step that sleeps or waits on a device queues for nothing. CPU time would
    not do: a step that waits would never spend its budget."""
    if wall <= 0:
        return 0.0
    runnable = max(1.0, (rq_all + run_all) / wall)
    return min(wall, max(rq_self, rq_all / runnable))
