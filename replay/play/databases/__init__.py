"""Database calls answered from the recording (the exporter's ``databases`` hooks' slot)."""
