"""What a replay loads: `rewind-replay` and the replayed child import the replay path and nothing
else (no time travel, collector, rich, HTTP library, OpenTelemetry SDK). Every replay pays for
each import before the user's program starts; the timings are in bench/replay.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.cli import user_env, weather_run_file

# Not needed to start a replay: loaded by other commands only.
ELSEWHERE = ("rich", "httpx", "httpx2", "click_default_group", "detect_secrets", "chdb",
             "clickhouse_connect", "google.protobuf", "opentelemetry.sdk",
             "rewind.replay.timetravel", "rewind.replay.cli.subcommands",
             "rewind.collector.command",
             "rewind.collector.store.read.reader",
             "rewind.replay.sources.credentials", "rewind.exporter.otlp.otel_pipeline",
             "rewind.exporter.capture.recording", "rewind.exporter.providers.enrichment")


# Not needed in a replayed child whose recording holds its own exchanges (no calls rebuilt from
# another instrumentation's content) and whose program uses no agent framework.
CHILD_ELSEWHERE = ("opentelemetry", "dateutil.parser", "rewind.replay.cassette.build",
                   "rewind.replay.cassette.formats", "rewind.replay.cassette.semantic",
                   "rewind.exporter.frameworks.openai_agents",
                   "rewind.exporter.frameworks.langchain_tools",
                   "rewind.exporter.frameworks.pydantic_ai_tools",
                   "rewind.exporter.frameworks.mcp_client")


def imported(importtime: str) -> set[str]:
    """Module names from ``python -X importtime`` output."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines()
            if line.startswith("import time:") and "|" in line}


def not_needed(modules: set[str], allowed: tuple[str, ...] = ()) -> set[str]:
    return {m for m in modules if any(m == x or m.startswith(x + ".") for x in ELSEWHERE)
            and not any(m == x or m.startswith(x + ".") for x in allowed)}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The CLI's own process under ``-X importtime`` (its children are not profiled)."""
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "rewind.replay.cli.main",
                           *args], capture_output=True, text=True, timeout=120,
                          env=env or user_env())


def test_replay_help_loads_the_replay_command_alone():
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import sys; sys.argv = ['rewind-replay', "
         "'--help']; from rewind.replay.cli.main import replay_main; replay_main()"],
        capture_output=True, text=True, timeout=60, env=user_env())
    assert done.returncode == 0, done.stderr
    assert "Run COMMAND with every LLM call answered from a recorded trace" in done.stdout
    modules = imported(done.stderr)
    assert "click" in modules
    assert not_needed(modules) == set()


def test_a_replay_from_a_file_loads_no_recording_pipeline(tmp_path: Path):
    run = weather_run_file(tmp_path)
    script = tmp_path / "modules.py"
    script.write_text("import json, sys\nprint(json.dumps(sorted(sys.modules)))\n")
    done = cli("replay", "--cassette", str(run), "--allow-unused", "--", sys.executable,
               str(script))
    assert done.returncode == 0, done.stderr
    assert not_needed(imported(done.stderr)) == set()  # the CLI process
    child = set(json.loads(done.stdout))
    assert "rewind.replay.play.player" in child  # the replay was installed in the child
    # The HTTP libraries are patched when the program imports them: this one imports none.
    assert not_needed(child) == set()
    assert "time_machine" in child  # the recorded clock is on
    assert {m for m in child if any(m == x or m.startswith(x + ".") for x in CHILD_ELSEWHERE)
            } == set()
    assert "replayed 0/" in done.stderr and "recorded steps of trace" in done.stderr
    assert "the replayed run is trace" not in done.stderr  # it records nothing


def test_the_server_and_time_travel_commands_still_load_when_asked(tmp_path: Path):
    done = cli("bisect", "--help")
    assert done.returncode == 0, done.stderr
    assert "rewind.replay.timetravel.bisect" in imported(done.stderr)
    assert "The first step where BAD departed from GOOD" in done.stdout
    done = cli("serve", "--help")
    assert done.returncode == 0 and "--grpc-port" in done.stdout
