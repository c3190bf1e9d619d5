"""The in-container agent: stdlib only, Python 3.6+, never imports harness.*.

The host mounts this directory read-only and runs `python3 agent.py ...` with the image's
interpreter; it imports only `fields`, so both sides name the fields from one list.
"""
