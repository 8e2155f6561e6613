"""Analysis and editing of recorded runs: alignment, diff, bisect, fork edits, the ``Timeline``
API, run listings and usage stats.
"""
