"""Drive harness/agent/attribution.py over a scenario the way the agent does, print the record.

    python attribution_driver.py SCENARIO KINDS COUNT [WARMUP [SAMPLE_EVERY [STOP_AT]]]

Run by the attribution tests under each interpreter (stdlib only, Python 3.6 syntax):
setup, warm-up steps, then measure_start / step + at_sample every SAMPLE_EVERY steps /
measure_end, as the agent's measured loop calls them. STOP_AT ends the loop early (a live
decision's stop).
"""

import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness", "agent"))

import attribution  # noqa: E402


def drive(path, kinds, count, warmup=10, every=10, stop_at=None):
    spec = importlib.util.spec_from_file_location("scenario", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    state = module.setup({})
    for _ in range(warmup):
        module.step(state)
    where = attribution.make(kinds, path)
    done = [0]
    where.measure_start(count, lambda: done[0])
    while done[0] < count and done[0] != stop_at:
        module.step(state)
        done[0] += 1
        if done[0] % every == 0:
            where.at_sample(done[0])
    return where.measure_end(done[0])


def main(argv):
    numbers = [int(a) for a in argv[3:]]
    record = drive(argv[1], argv[2].split(","), int(argv[3]), *numbers[1:])
    sys.stdout.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
