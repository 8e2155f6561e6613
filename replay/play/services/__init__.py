"""Replaying services: one recorded request (or job) sent again and its answer compared, and a
replayed process answering several recorded requests, each from its own trace."""
