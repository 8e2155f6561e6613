"""The reader layer: every read query of the store (``reader``: spans and listings,
``reader_usage``, ``reader_runs``, ``reader_suites``), returning typed rows, and the filters a
read of many traces may take (``filters``). No SQL that reads is written elsewhere except on
the schema side (``tests/test_layout.py``)."""
