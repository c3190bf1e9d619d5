"""The in-container agent: stdlib only, Python 3.6+, never imports harness.*.

The host mounts this directory read-only and runs `python3 agent.py ...` with the
image's own interpreter. The host imports one module of it, `fields` (the protocol's
field names, plain tuples), so that both sides name the fields from one list.
"""
