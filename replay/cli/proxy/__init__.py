"""``rewind proxy`` and the ``--proxy`` flag of record and replay."""
