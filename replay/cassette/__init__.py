"""The recording as data: the cassette model, conversations read from spans, semantic keys,
answers synthesised in each provider's wire format, ``.rw`` files, credential screening, and
where a trace comes from (store, worker, file). Pure where it can be; imports nothing above it.
"""
