"""`harness bisect`: the first bad image of a row in about log2(n) cells (`plan`), and the
command (`app`)."""
