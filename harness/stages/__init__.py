"""A cell's way through a sweep, shared by every plan that runs cells: stages, each given the
services it uses (`context.Context`), never the sweep. `measure.STAGES`: prepare image -> GPU
precheck -> run; then, once the row's baseline is known, `settle.settle`. `orchestrator`
wires them and schedules cells in lanes; `options` is what a sweep is asked.
"""
