"""A command that reached Rewind as data runs only when the engineer asks for that very one.

Against the real ``rewind serve`` (tokens: the engineer and another sender of the same
tenant) and the real CLI on a pipe: a run sent over OTLP whose resource carries a forged
``process.command_args`` (what ``rewind record`` writes there), the same run as a ``.rw``
file, an OTLP/JSON file and a tenant's ``POST /v1/import`` are each refused by ``rewind
replay`` with no command (exit 2, the command shown with its escapes visible), and run with
``--run-recorded-command`` or a yes at a terminal (a pty). The engineer's own ``rewind record``
replays with no question, from the store or from its ``.rw`` file, and not on a machine with
another key. A suite's stored command never beats the one given after ``--``; one from a
tenant's ``PUT /v1/suites`` or an exported folder is refused unless asked for; the pages show
commands the same escaped way, saying whether this machine signed them."""

from __future__ import annotations

import base64
import json
import os
import pty
import re
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rewind.exporter.core import attributes as A
from rewind.replay.sources.cli_settings import ENV_COMMAND_KEY
from rewind.replay.sources.commands import RUN_RECORDED_FLAG, shown
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import BIN, rewind, user_env
from tests.support.harness import Recording, Served, start_serve
from tests.support.tenants import bearer, chat_run, provider_for

ENGINEER, MALLORY = "tok-engineer", "tok-mallory"  # two senders of one tenant
MARKER = "pwned"
# Shown raw, the escapes erase the line and move up: a terminal would show `python agent.py`.
FORGED = ["sh", "-c", f"touch {MARKER} #\x1b[2K\x1b[1A\x1b[2K\rpython agent.py"]
AGENT = textwrap.dedent(
    """
    import os
    import openai

    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-x",
                           max_retries=0)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    print("agent done")
    """
)


@dataclass
class World:
    served: Served
    base: Path
    forged: str  # sent over OTLP by another sender, process.command_args forged
    forged_file: Path  # another forged run, as an OTLP/JSON file (never sent)
    forged_file_trace: str
    signed: str  # the engineer's own `rewind record -- python agent.py`

    def env(self, **extra: str) -> dict[str, str]:
        """The engineer's shell: the worker, its token, and where replayed runs record."""
        return {**_engineer(self.served), "LLM_URL": Recording.dead_url(), **extra}

    def folder(self, name: str) -> Path:
        """A fresh working directory holding agent.py, where a marker would appear."""
        folder = self.base / name
        folder.mkdir()
        (folder / "agent.py").write_text(AGENT)
        return folder

    def cli(self, *args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
        return rewind(*args, cwd=cwd, env=self.env(**extra), timeout=300)


def _hex_ids(node: Any) -> None:
    """OTLP/JSON as the Collector's file exporter writes it: ids in hex, not base64."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and value:
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)


def _run(otlp_http: str, llm: FakeLLMServer, keep: InMemorySpanExporter | None = None) -> str:
    """A run of another sender: one chat call through the real SDK, its resource's
    ``process.command_args`` forged as OTEL_RESOURCE_ATTRIBUTES would carry it; sent over
    OTLP, or only kept in ``keep``."""
    resource = {A.PROCESS_COMMAND_ARGS: json.dumps(FORGED)}
    if keep is None:
        return chat_run(provider_for(otlp_http, MALLORY, "agent", resource), llm)
    provider = TracerProvider(resource=Resource.create({"service.name": "agent", **resource}))
    provider.add_span_processor(SimpleSpanProcessor(keep))  # not sent: kept for the file
    return chat_run(provider, llm)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("trust")
    served = start_serve(base / "store",
                         args=("--auth-tokens", f"{ENGINEER} team-a,{MALLORY} team-a"))
    try:
        otlp_http = re.search(r"otlp-http=(\S+)", "\n".join(served.log)).group(1)
        kept = InMemorySpanExporter()
        with FakeLLMServer() as llm:
            forged = _run(otlp_http, llm)
            forged_file_trace = _run(otlp_http, llm, keep=kept)
            (base / "agent.py").write_text(AGENT)
            recorded = rewind("record", "--", sys.executable, "agent.py", cwd=base,
                              env={**_engineer(served), "LLM_URL": llm.base_url})
        assert recorded.returncode == 0, recorded.stderr
        [signed] = re.findall(r"recorded trace ([0-9a-f]{32})", recorded.stderr)
        document = json_format.MessageToDict(encode_spans(kept.get_finished_spans()))
        _hex_ids(document)
        forged_file = base / "forged.json"
        forged_file.write_text(json.dumps(document))
        for trace_id in (forged, signed):
            served.wait_for_spans(trace_id, 2, token=ENGINEER)
        yield World(served, base, forged, forged_file, forged_file_trace, signed)
    finally:
        served.stop()


def _engineer(served: Served) -> dict[str, str]:
    return user_env(REWIND_URL=served.api_url, REWIND_API_TOKEN=ENGINEER,
                    OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{served.grpc_endpoint}",
                    OTEL_EXPORTER_OTLP_HEADERS=f"authorization=Bearer {ENGINEER}")


def _refused(done: subprocess.CompletedProcess, where: Path, words: list[str]) -> None:
    """Nothing ran; the usage exit code; the command shown as shell words, escapes visible,
    and the way to run it named."""
    assert not (where / MARKER).exists(), "the recorded command ran"
    assert done.returncode == 2, done.stderr
    assert shown(words) in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and "\r" not in done.stderr
    assert "not run unasked" in done.stderr and RUN_RECORDED_FLAG in done.stderr


def test_a_command_sent_over_otlp_is_refused_on_a_pipe(world):
    here = world.folder("otlp")
    done = world.cli("replay", "--trace-id", world.forged, cwd=here)
    _refused(done, here, FORGED)
    assert f"the command saved with trace {world.forged} was not recorded on this machine" \
        in done.stderr
    # rewind-replay too
    done = rewind("--trace-id", world.forged, program="rewind-replay", cwd=here,
                  env=world.env())
    _refused(done, here, FORGED)


def test_the_flag_runs_the_command_it_shows(world):
    here = world.folder("flag")
    done = world.cli("replay", "--trace-id", world.forged, RUN_RECORDED_FLAG, "--allow-unused",
                     cwd=here)
    assert (here / MARKER).exists(), done.stderr
    assert f"rewind: running the recorded command: {shown(FORGED)}" in done.stderr


def test_a_forged_trace_file_is_refused(world):
    here = world.folder("files")
    exported = world.cli("export", world.forged, "-o", str(here / "evil.rw"), cwd=here)
    assert exported.returncode == 0, exported.stderr
    for file in (here / "evil.rw", world.forged_file):  # a .rw file, an OTLP/JSON file
        _refused(world.cli("replay", "--cassette", str(file), cwd=here, REWIND_URL="off"),
                 here, FORGED)


def test_a_tenants_import_is_refused(world):
    here = world.folder("import")
    done = httpx.post(f"{world.served.api_url}/v1/import", headers=bearer(MALLORY),
                      content=world.forged_file.read_bytes(), timeout=30)
    assert done.status_code == 200, done.text
    assert done.json()["trace_ids"] == [world.forged_file_trace]
    _refused(world.cli("replay", "--trace-id", world.forged_file_trace, cwd=here), here, FORGED)


def test_your_own_recording_replays_with_no_question(world):
    here = world.folder("own")
    done = world.cli("replay", "--trace-id", world.signed, cwd=here)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent done\n"
    assert f"rewind: running the recorded command: {shown([sys.executable, 'agent.py'])}" \
        in done.stderr
    # its .rw file keeps the signature: it replays unasked on this machine too
    exported = world.cli("export", world.signed, "-o", str(here / "own.rw"), cwd=here)
    assert exported.returncode == 0, exported.stderr
    done = world.cli("replay", "--cassette", str(here / "own.rw"), cwd=here, REWIND_URL="off")
    assert done.returncode == 0 and done.stdout == "agent done\n", done.stderr
    # on a machine with another key it is someone else's command
    other = world.cli("replay", "--cassette", str(here / "own.rw"), cwd=here, REWIND_URL="off",
                      **{ENV_COMMAND_KEY: str(here / "other.key")})
    assert other.returncode == 2 and "not recorded on this machine" in other.stderr
    assert other.stdout == ""


def _at_a_terminal(world: World, here: Path, answer: str) -> tuple[int, str]:
    """``rewind replay`` of the forged run with stdin and stderr a terminal (a pty), the
    question answered with ``answer``; its exit code and what the terminal showed."""
    master, slave = pty.openpty()
    child = subprocess.Popen([str(BIN / "rewind"), "replay", "--trace-id", world.forged,
                              "--allow-unused"], cwd=here, env=world.env(),
                             stdin=slave, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    shown_text = b""
    deadline = time.monotonic() + 120
    try:
        while b"Run it? [y/N]" not in shown_text and time.monotonic() < deadline:
            if select.select([master], [], [], 1)[0]:
                shown_text += os.read(master, 65536)
        os.write(master, answer.encode() + b"\n")
        code = child.wait(timeout=120)
        while select.select([master], [], [], 0.2)[0]:
            try:
                shown_text += os.read(master, 65536)
            except OSError:
                break
    finally:
        os.close(master)
        if child.poll() is None:
            child.kill()
    return code, shown_text.decode("utf-8", "replace")


def test_at_a_terminal_the_command_is_shown_and_asked_for(world):
    here = world.folder("tty-no")
    code, seen = _at_a_terminal(world, here, "n")
    question = seen[seen.index("was not recorded"):seen.index("Run it?")]
    assert shown(FORGED) in question and "\x1b" not in question
    assert code == 2 and not (here / MARKER).exists()
    here = world.folder("tty-yes")
    code, seen = _at_a_terminal(world, here, "y")
    assert (here / MARKER).exists(), seen


def _suite(world: World, name: str, command: list[str]) -> None:
    """A suite of the engineer's run, kept by the other sender with its own command."""
    done = httpx.put(f"{world.served.api_url}/v1/suites/{name}", headers=bearer(MALLORY),
                     json={"runs": [{"trace_id": world.signed, "command": command}]},
                     timeout=30)
    assert done.status_code == 200, done.text


def test_the_command_after_the_dashes_beats_a_stored_one(world):
    _suite(world, "nightly", ["sh", "-c", f"touch {MARKER}"])
    here = world.folder("suite-dashes")
    done = world.cli("suite", "run", "nightly", "--", sys.executable, "agent.py", cwd=here)
    assert not (here / MARKER).exists()
    assert done.returncode == 0, done.stderr
    assert "suite nightly: 1/1 runs passed" in done.stderr
    # without a command the stored one, not signed here, is refused before anything runs
    done = world.cli("suite", "run", "nightly", cwd=here)
    _refused(done, here, ["sh", "-c", f"touch {MARKER}"])


def test_an_exported_folders_command_runs_only_when_asked_for(world):
    _suite(world, "shipped", ["sh", "-c", f"touch {MARKER}\npython agent.py"])
    here = world.folder("suite-folder")
    exported = world.cli("suite", "export", "shipped", "-o", str(here / "suite"), cwd=here)
    assert exported.returncode == 0, exported.stderr
    words = ["sh", "-c", f"touch {MARKER}\npython agent.py"]
    _refused(world.cli("suite", "run", str(here / "suite"), cwd=here), here, words)
    # the suite's page and `suite show` show it on one line, escapes visible
    page = httpx.get(f"{world.served.api_url}/suites/shipped", headers=bearer(ENGINEER),
                     timeout=30).text
    data = json.loads(re.search(r'<script type="application/json" id="rewind-data">(.*?)'
                                r"</script>", page, re.S).group(1))
    [run] = data["runs"]
    assert run["command"] == shown(words) and run["command_signed"] is False
    listed = world.cli("suite", "show", "shipped", cwd=here)
    assert shown(words) in listed.stdout and listed.stdout.count("\n") == 1
    # asked for, it runs
    done = world.cli("suite", "run", str(here / "suite"), RUN_RECORDED_FLAG, cwd=here)
    assert (here / MARKER).exists(), done.stderr


def test_a_command_the_engineer_stored_runs_unasked(world):
    here = world.folder("suite-own")
    added = world.cli("suite", "add", "mine", world.signed, "--command",
                      f"{sys.executable} agent.py", cwd=here)
    assert added.returncode == 0, added.stderr
    [run] = json.loads(world.cli("suite", "show", "mine", "--json", cwd=here).stdout)["runs"]
    assert run["command"] == [sys.executable, "agent.py"] and run["command_signature"]
    done = world.cli("suite", "run", "mine", cwd=here)
    assert done.returncode == 0, done.stderr
    assert "suite mine: 1/1 runs passed" in done.stderr


def test_the_run_page_shows_whose_command_it_is(world):
    def offered(trace_id: str) -> dict[str, Any]:
        reply = httpx.get(f"{world.served.api_url}/v1/ui/traces/{trace_id}",
                          headers=bearer(ENGINEER), timeout=30)
        assert reply.status_code == 200, reply.text
        return reply.json()["replay"]

    forged = offered(world.forged)
    assert forged["line"].endswith(f"-- {shown(FORGED)}") and "\x1b" not in forged["line"]
    assert "not signed on this machine" in forged["label"]
    own = offered(world.signed)
    assert own["line"].endswith(f"-- {shown([sys.executable, 'agent.py'])}")
    assert "signed by rewind record on this machine" in own["label"]
