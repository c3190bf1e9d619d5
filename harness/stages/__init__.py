"""A cell's way through a sweep, shared by every plan that runs cells: one downward list
of stages, each taking the last one's value and given the services it uses
(`context.Context`), never the sweep.

`measure.STAGES`: prepare the image -> GPU precheck -> run attempts -> the within-run
result. Then, once its row's baseline is known (`settle.Rows`), `settle.settle`: compare
with the row (a result, or the rounds it needs as a `context.RoundsPlan`) -> run the
rounds -> decide. `orchestrator` schedules cells in lanes (one per GPU).

`orchestrator.Sweep` only wires these; the sweep's course, `bisect`, `fit`, `culprit`
and `explain` are plans over the same stages. `options` is what a sweep is asked.
"""
