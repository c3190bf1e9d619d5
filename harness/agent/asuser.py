"""The step timed as the user's interpreter runs it (--as-user S): after the measured
phase a second agent, started with the user's allocator settings (read only at an
interpreter's start), runs setup and then steps for S seconds without heap readings;
its step samples are written here as user samples, the report's time per call. The
memory evidence and the time trend stay the measured phase's. Stdlib only, Python 3.6+."""
import array
import binascii
import json
import os
import signal
import sys
import time

import fields

HERE = os.path.dirname(os.path.abspath(__file__))
# The second agent's --budget-min and --budget-max.
LEAST_CALLS, MOST_S = 3, 5.0
# Its shortest budget: it steps for --as-user seconds, or as long as the measured phase
# took where that was shorter (a run of a few fixed calls is not timed for 0.5 s after).
LEAST_S = 0.25
# What of its step samples is written here: where, when and the interval's CPU and
# contention; no memory.
TIMING = frozenset(("type", "i", "t", "cpu_s", "clock_s")
                   + tuple(name for name, _ in fields.CONTENTION))
# The most calls it makes (their step times are read back from disk).
MOST_CALLS = 2000000
# Its share of the host's deadline left; one that cannot end in it is not started.
DEADLINE_SHARE = 0.25


def time_as_user(args, sampler, writer, age, measured=None):
    """Run the second agent for `args.as_user` seconds, or `measured` (the measured
    phase's seconds) where shorter, LEAST_S at least, writing its step samples as phase
    "user"; `age`: this process's age (for --deadline). Returns the end record's account:
    calls, seconds, allocator settings, or why it did not run or failed."""
    seconds = args.as_user
    if measured is not None:
        seconds = min(seconds, max(LEAST_S, round(measured, 3)))
    said = {"budget_s": seconds}
    if args.deadline > 0:
        left = args.deadline - age
        if left * DEADLINE_SHARE < MOST_S + seconds * 2:
            said["skipped"] = "%.0f s of the deadline left" % max(0.0, left)
            return said
        wait = left * DEADLINE_SHARE
    else:
        wait = 120.0
    out = (args.out or os.path.join(os.getcwd(), "samples.jsonl")) + ".user"
    argv = [sys.executable, os.path.join(HERE, "agent.py"), "--scenario", args.scenario,
            "--params", args.params or "{}", "--iterations", str(MOST_CALLS),
            "--warmup", str(max(1, args.warmup)), "--warmup-share", "0.25",
            "--budget", "%g" % seconds, "--budget-min", str(LEAST_CALLS),
            "--budget-max", "%g" % MOST_S, "--max-overhead", "0.005",
            "--sample-interval", "%g" % max(args.sample_interval, 1.0),
            "--out", out, "--quiet", "--no-gpu", "--no-heap", "--no-fsync",
            "--heap", "stock", "--stop-growth", "0"]
    import subprocess   # here: a run without --as-user starts no program (test_agent_cost)

    phase, sampler.phase = sampler.phase, "user"    # its readings are not the run's
    started = time.monotonic()
    proc = None
    try:
        with open(out + ".err", "wb") as err:
            # Its own session: what its setup starts dies with it and holds no pipe of ours.
            def start():
                return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=err,
                                        env=dict(os.environ), start_new_session=True)

            # its memory is not the scenario's workers'
            spawn = getattr(sampler.readers, "start_excluded", None)
            proc = spawn(start) if spawn is not None else start()
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            said["error"] = "did not end within %.0f s" % wait
            return said
        said["seconds"] = round(time.monotonic() - started, 3)
        said.update(_copied(out, writer))
        if proc.returncode != 0 and "error" not in said:
            said["error"] = ("exit %d: %s" % (proc.returncode, _last_line(out + ".err")))[:500]
    except OSError as exc:
        said["error"] = "could not start: %s" % exc
    finally:
        if proc is not None:
            _kill_session(proc)
        sampler.phase = phase
        for path in (out, out + ".err"):
            try:
                os.unlink(path)
            except OSError:
                pass
    return said


def _kill_session(proc):
    """Kill the second agent's session (it, and what its setup started) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait()
    except OSError:
        pass


def _last_line(path):
    """The last line of a file (its stderr), or ""."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _copied(path, writer):
    """Write the second agent's measured step samples as user samples (no memory: another
    process's) and return what its header and end record say. Read a line at a time:
    a cheap step's line holds a MiB of step times."""
    said = {}
    try:
        f = open(path)
    except OSError as exc:
        return {"error": "no samples: %s" % exc}
    with f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            kind = rec.get("type")
            if kind == "header":
                env = rec.get("env") or {}
                said["pythonmalloc"] = rec.get("pythonmalloc")
                said["glibc_tunables"] = env.get("GLIBC_TUNABLES")
            elif (kind == "sample" and rec.get("src") == "step"
                  and rec.get("phase") == "measure" and rec.get("dt_b64")):
                times = array.array("d", binascii.a2b_base64(rec["dt_b64"]))
                if sys.byteorder != "little":
                    times.byteswap()
                out = dict((k, v) for k, v in rec.items() if k in TIMING)
                out.update(src="user", phase="user", steps=len(times),
                           dt_s=round(sum(times), 9))
                writer.write(out)
            elif kind == "end":
                said["calls"] = rec.get("iterations", 0)
                if rec.get("status") != "ok":
                    err = rec.get("error") or {}
                    said["error"] = ("%s: %s" % (err.get("type"),
                                                 err.get("message")))[:500]
    return said
