"""What the recording gives back in a replayed process: which recorded interaction answers a
request (matching), the answer in the shape asked for (shapes), when it goes (ordering), and
the recorded clock. Apart from the session that decides and keeps the tally."""
