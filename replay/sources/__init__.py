"""Where a trace comes from and goes to: the store or a running worker (``locate``), ``.rw``
files (``archive``, ``document``), OTLP files (``otlp_files``), and the credential screening
every file crossing the boundary goes through (``credentials``). Built on the cassette layer.
"""
