"""`harness day` and `--find-cause`: the day search (`search`), each bad row's journey to
its cause (`journey`), and the command's work (`app`)."""
