"""`harness fit`: the largest param value that runs. The probes' plan (`steps`, pure) and
their runs (`plan`), memory per unit (`memory`), the answer in words, JSON, Markdown and
HTML (`page`), two fits side by side (`compare`), and the command's work for the CLI
(`app`)."""
