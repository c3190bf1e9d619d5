"""The application layer: what a command does, called alike by the CLI (`harness/cli/`),
the Python API (`harness/api/`) and the pytest plugin; none of its modules imports `cli`.
Here: app-only commands (`why`) and what commands share; a command with modules of its
own keeps its `app` in its folder (`harness.compare`, ...)."""
