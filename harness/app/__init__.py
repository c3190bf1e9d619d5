"""The application layer: what a command does, called alike by the CLI (`harness/cli/`,
which parses arguments and prints), the Python API (`harness/api/`) and the pytest
plugin. A module per command; none of them imports `cli`."""
