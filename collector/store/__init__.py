"""The store: the connection, schema, migrations (``migrations/``, by job) and their
bookkeeping, prices, ddl, the reader layer (``read/``: every read query, and the filters they
take) and the settings of the collector.
"""
