"""Plans that run new cells over the sweep's stages and belong to no one answer: `bisect`
(the first bad image in about log2(n) cells) and `saved` (a saved run compared with a
new one). Each answer's own plan is in its folder (`harness.culprit`, `harness.days`,
`harness.explain`, `harness.fit`)."""
