"""A cell's way through a sweep, as named stages over one per-cell value (`CellRun`).

`measure.STAGES`, in order: prepare the image (`images`) -> GPU precheck (`gpucheck`) ->
run attempts (`attempts`: each attempt runs the agent, reads its samples and decides the
within-run verdict; an ambiguous one runs again, longer) -> the within-run result
(`measure`). Then, once its row's baseline is known: compare with the row, with
confirmation rounds where the pooled test leaves a doubt (`rows`, `confirm`) -> store
(`rows`: `result.json`, once). `lanes` schedules cells (one per GPU, lanes in parallel).

`orchestrator.Sweep` only wires these; `bisect`, `fit` and `explain` are other plans over
the same stages (`measure.measure`, `rows.compare`, `attempts.execute`).
"""
