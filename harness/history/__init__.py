"""`harness history`: every run of a matrix read through the gate, in order (`model`),
and the command's work with its console and HTML pages (`app`)."""
