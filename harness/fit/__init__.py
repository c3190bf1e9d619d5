"""`harness fit`: the largest param value that runs. The probes' plan, their runs and
memory per unit (`plan`), and the command's work for the CLI with the answer in words,
JSON, Markdown and HTML (`app`)."""
