"""The store: schema, migrations, the connection, every read query (the reader layer), filters,
prices, and the settings of the collector, worker and CLI.
"""
