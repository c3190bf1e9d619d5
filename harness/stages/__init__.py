"""A cell's way through a sweep, which every plan that runs cells shares: one downward
list of stages, each taking the last one's value and returning its own, given the
services it uses (`context.Context`), never the sweep.

`measure.STAGES`, in order, over one per-cell value (`CellRun`): prepare the image
-> GPU precheck -> run attempts (`measure.run_attempts`: each attempt runs the agent
through the run service, `context.Runner`, reads its samples and decides the within-run
verdict; an ambiguous one runs again, longer) -> the within-run result (`measure`).
Then, once its row's baseline is known (`settle.Rows`: the results that stand and the
jobs ready to settle), `settle.settle`: compare with the row (`settle.against_row`: a
result, or the rounds it needs as a `context.RoundsPlan`) -> run the rounds
(`settle.run_rounds`, through the same `context.Runner`) -> decide with them
(`settle.with_rounds`); the lane then stores the result (`result.json`, once).
`orchestrator` schedules cells in lanes (one per GPU, lanes in parallel). The image
pool, the GPU facts and the run are services the `Context` holds: the stages ask them,
and they hand nothing on.

`orchestrator.Sweep` only wires these; the sweep's course (`harness.sweeping`),
`bisect`, `fit`, `culprit`, `explain` and a saved run's comparison are plans over the
same stages (`measure.measure`, `settle.settle`, `settle.run_plan`, `context.Runner`).
What a sweep is asked is `options`, which the commands that sweep share.
"""
