"""Answers from finished cells that report renders: the first bad image of a row and its
good and bad pairs (search), and the stored culprit, cause and explain answers
(culprits, causes, explained)."""
