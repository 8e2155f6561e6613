"""Rewind replay: cassettes from stored spans, deterministic replay, divergence reports."""
