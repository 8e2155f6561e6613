"""Suites: named sets of recorded runs replayed together and judged (``rewind suite``)."""
