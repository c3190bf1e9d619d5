"""`harness watch`: a repository's new tags, from its registry, run through a suite
against a baseline tag (suite), swept in a new results directory (app)."""
