"""The sweep, one home: its course, one list of named steps (`course.COURSE`: engines,
store, lanes, after-sweep answers, reports), above the commands whose answers it gives
after the cells ran (`after`: `--explain`, `--find-cause`, `--between`'s culprit), and
`--between`'s matrix of two lock files (`between`). Each cell goes its way through
`harness.stages`, below every command that runs cells.
"""
