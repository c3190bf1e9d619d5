"""A cell's way through a sweep, one downward list of stages, each taking the last one's
value and returning its own, given the services it uses (`context.Context`), never the
sweep.

`measure.STAGES`, in order, over one per-cell value (`CellRun`): prepare the image
(`images`) -> GPU precheck (`gpucheck`) -> run attempts (`measure.run_attempts`: each
attempt runs the agent through the run service, `execute.Runner`, reads its samples and
decides the within-run verdict; an ambiguous one runs again, longer) -> the within-run
result (`measure`). Then, once its row's baseline is known (`way.Rows`: the results that
stand and the jobs ready to settle), `way.settle`: compare with the row (`compare`: a
result, or the rounds it needs as a `context.RoundsPlan`) -> run the rounds
(`confirm.run_rounds`, through the same `execute.Runner`) -> decide with them
(`decide.with_rounds`); the lane then stores the result (`result.json`, once). `lanes`
schedules cells (one per GPU, lanes in parallel). The image pool, the GPU facts and the
run are services the `Context` holds: the stages ask them, and they hand nothing on.

`orchestrator.Sweep` only wires these; `bisect`, `fit`, `culprit`, `explain` and a saved
run's comparison are other plans over the same stages (`measure.measure`,
`way.settle`, `way.run_plan`, `execute.Runner`).
"""
