"""Starting and stopping a recorded process: the opentelemetry-instrument entry point, the process
root span, flushing at exit.
"""
