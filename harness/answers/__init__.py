"""Answers from finished cells that report renders: each row's first bad and pairs
(`search`), and the stored culprit, cause and explain answers."""
