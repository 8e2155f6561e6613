"""README's first screen, as a newcomer follows it: with ``rewind serve`` running, the two lines
of "Record your own agent", run as written in the agent's own folder, record the agent and
replay it offline by a prefix of the trace id the first one printed."""

from __future__ import annotations

import re
import shlex
import sys
import textwrap
from pathlib import Path

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind
from tests.support.harness import Recording, start_serve

ROOT = Path(__file__).resolve().parent.parent
AGENT = textwrap.dedent(
    """
    import os
    import openai

    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-x",
                           max_retries=0)
    for question in ("plan the trip", "book it"):
        answer = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": question}])
        print(answer.choices[0].message.content)
    """
)


def first_screen_commands() -> list[list[str]]:
    """The ``rewind`` lines of README's "Record your own agent" block, comments left out."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("## Record your own agent", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("#", 1)[0]) for line in block.splitlines()
            if line.startswith("rewind")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    served = start_serve(tmp_path_factory.mktemp("first-screen") / "store")
    yield served
    served.stop()


def test_record_then_replay_as_the_readme_says(served, tmp_path):
    record, replay = first_screen_commands()
    assert record[:2] == ["rewind", "record"] and replay[0] == "rewind-replay"
    agent_dir = tmp_path / "my-agent"  # the agent's own folder, not Rewind's
    agent_dir.mkdir()
    (agent_dir / "my_agent.py").write_text(AGENT, "utf-8")

    def as_typed(words: list[str], **names: str) -> list[str]:
        return [names.get(word, sys.executable if word == "python" else word)
                for word in words[1:]]

    with FakeLLMServer() as llm:
        env = served.env(LLM_URL=llm.base_url, COLUMNS="100")
        recorded = rewind(*as_typed(record), cwd=agent_dir, env=env)
    assert recorded.returncode == 0, recorded.stderr
    [trace_id] = re.findall(r"rewind: recorded trace ([0-9a-f]{32})", recorded.stderr)
    answers = recorded.stdout.splitlines()
    assert len(answers) == 2 and all(answers), recorded.stdout

    [shown_prefix] = [w for w in replay if re.fullmatch(r"[0-9a-f]{8}", w)]
    offline = served.env(LLM_URL=Recording.dead_url(), COLUMNS="100")  # the model is gone
    replayed = rewind(*as_typed(replay, **{shown_prefix: trace_id[:8]}),
                      program="rewind-replay", cwd=agent_dir, env=offline)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert "replayed 2/2 recorded steps" in replayed.stderr, replayed.stderr
