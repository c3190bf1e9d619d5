"""Plans that run new cells over the sweep's stages and belong to no one answer: `bisect`
(the first bad image in about log2(n) cells). Each answer's own plan is in its folder
(`harness.culprit`, `harness.days`, `harness.explain`, `harness.fit`); a saved run compared
with a new one is the Python API's (`harness.api.saved`)."""
