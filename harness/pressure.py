"""The host's CPU pressure (Linux PSI), read beside each host-side sample.

`/proc/pressure/cpu`'s "some" line: the share of time a runnable task waited for a CPU
(avg10, percent) and the total stall (us). It says how busy the whole host was, beside
the agent's own run-queue delay. Kernels without PSI give nothing.
"""

from __future__ import annotations

PSI_CPU = "/proc/pressure/cpu"


def cpu_pressure(path: str = PSI_CPU) -> dict[str, float]:
    """{"psi_some_avg10": percent, "psi_some_total_us": us}, or {} without PSI."""
    try:
        with open(path) as f:
            text = f.read(512)
    except OSError:
        return {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind != "some":
            continue
        fields = dict(p.split("=", 1) for p in rest.split() if "=" in p)
        try:
            return {"psi_some_avg10": float(fields["avg10"]),
                    "psi_some_total_us": float(fields["total"])}
        except (KeyError, ValueError):
            return {}
    return {}
