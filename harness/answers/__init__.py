"""Answers from finished cells: the first bad image of a row (search), bisecting a row
over an ordered image list (bisect), and two result sets side by side (hostcompare)."""
