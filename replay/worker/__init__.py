"""The worker's HTTP API (Starlette): one module per resource, auth and tenant scoping at the
edge, the cassette cache, OpenAPI, and the server that runs it (alone or in ``rewind serve``).
"""
