"""Put on ``PYTHONPATH`` of a child process so that ``sitecustomize`` installs the replay."""
