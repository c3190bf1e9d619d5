"""`harness culprit`: which package change made a row's first bad image bad, proved both
ways. The plan (`plan`: hybrids run as cells; `search`: delta debugging over a probe
callback; `diff`: the package changes; `run`: the one entry point inside a results
directory), the answer read back (`model`), the proved change's code (`code`) and the
command's work for the CLI (`app`)."""
