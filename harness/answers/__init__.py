"""Answers from finished cells that report renders: the first bad image of a row (search),
its good and bad pairs (pairs), and the stored culprit, cause and explain answers
(culprits, causes, explained)."""
