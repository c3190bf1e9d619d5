"""`harness day` and `--find-cause`: the day search over a dated row (`search`), each bad
row's journey through day, explain, culprit, code, fixed and host (`journey`), and that
journey as data, in words and read back (`cause`); the command's work for the CLI
(`app`)."""
