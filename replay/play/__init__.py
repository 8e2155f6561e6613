"""Replaying a cassette: matching requests to recorded steps, the replay session, the in-process
player at the transport and tool hooks, the child-process launcher for replay, record and fork,
and the pytest plugin.
"""
