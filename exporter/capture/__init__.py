"""The HTTP transport seam: the slots a recorder, preparer or responder fills, one exchange, the
recorded call, and the hooks of each HTTP library.
"""
