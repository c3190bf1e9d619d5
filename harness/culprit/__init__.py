"""`harness culprit`: which package change made a row's first bad image bad, proved both
ways. The plan (`plan`: hybrids run as cells; `search`: delta debugging over a probe
callback; `changes`: the package changes and the proved change's code; `run`: the one
entry point inside a results directory) and the command's work for the CLI (`app`)."""
