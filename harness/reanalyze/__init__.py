"""`harness report DIR --reanalyze`: a recorded run decided again from its samples
(`decide`, writing nothing) and kept beside it with --write (`app`)."""
