"""`harness bisect`: the first bad image of a row in about log2(n) cells, each settled by
the sweep's stages (`plan`; culprit runs its probes through it too), and the command (`app`)."""
