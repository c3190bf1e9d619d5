"""`harness fit`: the largest param value that runs; the probes' plan and memory per unit
(`plan`), and the command's work and renderings (`app`)."""
