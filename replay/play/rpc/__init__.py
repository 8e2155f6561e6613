"""gRPC calls answered from the recording (the exporter's ``rpc`` hooks' slot)."""
