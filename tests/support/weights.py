"""Each test module's weight, read from its source, so a developer can run the light ones
alone (``make check``) and the suite can be cut by what a test needs:

- ``browser``: drives chromium (Playwright);
- ``databases``: starts PostgreSQL or Redis;
- ``process``: starts a process or a server (the CLI, ``rewind serve``, a replayed command,
  uvicorn, node);
- ``store``: opens the embedded store (chDB) in the test process;
- ``frameworks``: imports an agent framework (seconds of imports each);
- ``unit``: none of these: pure logic and in-process hooks against in-process servers.

The heaviest need found wins. The words looked for are those the modules use to start each
thing (fixtures and helpers of ``tests/support`` included), so a new module is weighed the
moment it exists; a module whose words mislead says its weight in a ``# weight: NAME`` line."""

from __future__ import annotations

import functools
import re
from pathlib import Path

WEIGHTS = ("browser", "databases", "process", "store", "frameworks", "unit")
_SAID = re.compile(r"^# weight: (\w+)$", re.MULTILINE)
_SIGNS = {
    "browser": re.compile(r"playwright|chromium|\bbrowser\b"),
    "databases": re.compile(r"postgres|redis|psycopg|asyncpg"),
    "process": re.compile(
        r"subprocess|Popen|start_serve|served\b|\bserve\(|run_command|run_service|"
        r"replay_over_http|run_recorded|rewind\(|CliRunner|uvicorn|\bnode\(|record_script|"
        r"recorded_run|record_parcel|parcel_|js_agents|cli import|harness import|"
        r"multiprocessing|launch\.|sink\b|Sink\(|grpc_service"),
    "store": re.compile(r"\bstore\b|Store\(|chdb|migrate"),
    "frameworks": re.compile(r"framework|langgraph|langchain|pydantic_ai|\bagents\b|litellm|"
                             r"dspy|llama_index|\bmcp\b"),
}


@functools.cache
def weight_of(path: Path) -> str:
    """The weight of the test module at ``path`` (one of :data:`WEIGHTS`)."""
    source = path.read_text("utf-8")
    if (said := _SAID.search(source)) and said.group(1) in WEIGHTS:
        return said.group(1)
    return next((weight for weight, sign in _SIGNS.items() if sign.search(source)), "unit")
