"""The application layer: what a command does, called alike by the CLI (`harness/cli/`,
which parses arguments and prints), the Python API (`harness/api/`) and the pytest
plugin; none of its modules imports `cli`. Here: commands that are only an app (`why`)
and what commands share; a command with modules of its own keeps its `app` in its folder
(`harness.bisect.app`, `harness.compare.app`, `harness.culprit.app`, ...), the sweep its
course in `harness.sweeping` (`harness.sweeping.course`)."""
