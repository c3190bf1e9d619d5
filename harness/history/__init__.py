"""`harness history`: every run of a matrix read through the gate, in order (`model`),
and its console and HTML pages (`page`)."""
