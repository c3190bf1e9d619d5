"""Answers from finished cells: the first bad image of a row (search), two result sets
side by side (hostcompare), a run decided again from its samples (reanalyze)."""
