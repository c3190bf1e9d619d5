"""`harness explain` and `--explain`: attributed runs of a row's first bad and last good
cells (`plan`), where.json read back and ranked (`model`), and the command's work for the
CLI (`app`)."""
