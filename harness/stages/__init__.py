"""A cell's way through a sweep, shared by every plan that runs cells: one downward list
of stages, each given the services it uses (`context.Context`), never the sweep.

`measure.STAGES`: prepare the image -> GPU precheck -> run attempts. Then, once its row's
baseline is known, `settle.settle`: compare -> rounds -> decide. `orchestrator` wires
these and schedules cells in lanes; `options` is what a sweep is asked.
"""
