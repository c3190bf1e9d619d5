"""`harness explain` and `--explain`: attributed runs of a row's first bad and last good
cells (`plan`), and the command's work (`app`)."""
