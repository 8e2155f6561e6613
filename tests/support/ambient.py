"""The suite reaches only servers it started. A `rewind serve` left running on the default
ports (8787 for the worker, 4317/4318 for the collector) must change no test: the CLI looks
for a worker on the default port only when ``REWIND_URL`` does not say otherwise, so the suite
says ``off`` (read the store itself) unless a test names its own worker. The key that signs
recorded commands is a file of the test run's own, never the user's."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rewind.exporter.core.process_settings import ENV_WORKER_URL
from rewind.replay.sources.cli_settings import ENV_COMMAND_KEY, NO_WORKER

COMMAND_KEY = Path(tempfile.mkdtemp(prefix="rewind-tests-key-")) / "command.key"

NO_AMBIENT = {ENV_WORKER_URL: NO_WORKER, ENV_COMMAND_KEY: str(COMMAND_KEY)}
