"""Plans that run new cells over the sweep's stages: `bisect` (the first bad image in
about log2(n) cells), `fit` (the largest param value that runs, planned by `fitplan`),
`explain` (attributed runs of a row's first bad and last good cells). The questions
answered from finished cells alone are in `harness.answers`.
"""
