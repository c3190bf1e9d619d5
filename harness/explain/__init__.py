"""`harness explain` and `--explain`: attributed runs of a row's first bad and last good
cells and the kinds they attribute (`plan`), and the command's work for the CLI
(`app`)."""
