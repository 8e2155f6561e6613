"""Migrations of the suites (``rewind suite``): their definitions and results."""
