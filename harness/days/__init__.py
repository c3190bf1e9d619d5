"""`harness day` and `--find-cause`: the day search over a dated row (`search`), each bad
row's journey through day, explain, culprit, code, fixed and host, as data and in words
(`journey`); the command's work for the CLI (`app`)."""
