"""The worker's routes, one module per resource (traces, trace files, analysis, replay sessions,
the web UI's pages), apart from what they all share (routing, tenancy, auth, the cache) so
that a resource is added without touching the machinery under it."""
