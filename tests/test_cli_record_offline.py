"""``rewind record`` with no collector listening. Named (``--endpoint``, the OTLP variables):
it says so before and after, does not claim a trace was recorded, and does not keep the user
waiting on export retries. Not named (no ``rewind serve`` running): a collector started for
the run stores it in the store ``rewind serve`` would open, ready to replay."""

from __future__ import annotations

import os
import sys
import textwrap

from rewind.collector.store.store import Store
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind, timed, user_env
from tests.support.harness import Recording
from tests.support.ports import free_port

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


def test_record_with_the_collector_down(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    down = Recording.dead_url()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with FakeLLMServer() as llm:
        env.update(COLUMNS="100", LLM_URL=llm.base_url, OTEL_EXPORTER_OTLP_ENDPOINT=down)
        done, took = timed("record", "--", sys.executable, str(script), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent done\n"
    lines = done.stderr.splitlines()
    assert lines[0] == (f"warning: nothing answers at {down}; start `rewind serve` or spans will "
                        "be dropped")
    assert lines[-1].startswith("warning: nothing was stored: the 2 spans of trace ")
    assert lines[-1].endswith(f"did not reach {down} (start `rewind serve`, or give the "
                              "collector with --endpoint)")
    assert "recorded trace" not in done.stderr
    assert took < 9, f"took {took:.1f} s"


def test_record_with_no_server_running_stores_the_run_itself(tmp_path):
    (tmp_path / "agent.py").write_text(AGENT)
    port = free_port()  # where `rewind serve` would listen (REWIND_GRPC_PORT): nothing does
    env = {k: v for k, v in user_env().items() if not k.startswith("OTEL_")}
    env["REWIND_GRPC_PORT"] = str(port)
    with FakeLLMServer() as llm:
        done = rewind("record", "--", sys.executable, "agent.py", cwd=tmp_path,
                      env={**env, "LLM_URL": llm.base_url})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent done\n"
    lines = done.stderr.splitlines()
    assert lines[0] == (f"rewind: nothing answers at http://127.0.0.1:{port}; recording "
                        "through a collector started here for the run")
    assert lines[1] == f"rewind: stored in chdb://{tmp_path}/.rewind/store"
    assert lines[2].startswith("rewind: recorded trace ") and len(lines) == 3, done.stderr
    trace_id = lines[2].split()[-1]
    # the run is in the store: listed, and replayed with the LLM gone
    listed = rewind("traces", cwd=tmp_path, env=env)
    assert trace_id[:8] in listed.stdout, listed.stdout + listed.stderr
    # with no command, the one saved with the run is run again
    replayed = rewind("--trace-id", trace_id, program="rewind-replay", cwd=tmp_path,
                      env={**env, "LLM_URL": Recording.dead_url()})
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == "agent done\n"
    assert f"rewind: running the recorded command: {sys.executable} agent.py" in replayed.stderr
    # a command that held a credential was saved masked: it is not run again as saved
    with FakeLLMServer() as llm:
        done = rewind("record", "--", sys.executable, "agent.py", "--api-key",
                      "sk-live-abcdefghijklmnop", cwd=tmp_path,
                      env={**env, "LLM_URL": llm.base_url})
    masked = done.stderr.splitlines()[2].split()[-1]
    refused = rewind("replay", "--trace-id", masked, cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[0] == (
        f"error: the recorded command of trace {masked} had a credential, masked when it was "
        "saved (give the command after --)")


def test_record_refuses_before_running_when_the_store_is_held_elsewhere(tmp_path):
    """No collector answers and another process holds the store: nothing could be stored, so
    the command is not run, and the message says where the spans should go."""
    (tmp_path / "agent.py").write_text("print('ran')\n")
    held = Store(f"chdb://{tmp_path / 'store'}")
    try:
        env = {k: v for k, v in user_env().items() if not k.startswith("OTEL_")}
        done = rewind("record", "--clickhouse", f"chdb://{tmp_path / 'store'}", "--",
                      sys.executable, "agent.py", cwd=tmp_path,
                      env={**env, "REWIND_GRPC_PORT": str(free_port())})
    finally:
        held.close()
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == (
        f"error: no collector answers and the store chdb://{tmp_path}/store is open in another "
        "process (send the spans to that process's collector: --endpoint, "
        "OTEL_EXPORTER_OTLP_ENDPOINT, or REWIND_GRPC_PORT for its port)")
