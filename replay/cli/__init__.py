"""The ``rewind`` and ``rewind-replay`` commands (click), their rendering (rich) and the demo.
"""
