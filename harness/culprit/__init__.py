"""`harness culprit`: which package change made a row's first bad image bad, proved both
ways (`plan`, `search`, `changes`, `run`; the command's work in `app`)."""
