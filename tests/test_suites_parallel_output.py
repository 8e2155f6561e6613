"""``rewind suite run NAME -j 2`` with two runs failing at the same time: each run is told in
one block (its line, what its command wrote to stderr, the changed field, the cause), never
mixed with the other's. The agent (the real ``openai`` SDK against the fake LLM, recorded with
``rewind record``) logs three lines to stderr before asking the model; both replays wait for
each other before they log, so their lines are written at the same time."""

# weight: process

from __future__ import annotations

import re
import textwrap

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.chat_suite import Chats

AGENT = textwrap.dedent(
    """\
    import os, sys, time
    from pathlib import Path

    import openai

    question = sys.argv[1]
    meet = os.environ.get("MEET_DIR")  # both replays log at once: each waits for the other
    if meet:
        Path(meet, question.replace(" ", "-")).touch()
        for _ in range(1200):
            if len(os.listdir(meet)) >= 2:
                break
            time.sleep(0.05)
    for step in (1, 2, 3):
        print(f"agent {question}: warming up {step}/3", file=sys.stderr, flush=True)
        time.sleep(0.2)
    client = openai.OpenAI(max_retries=0)
    system = Path(__file__).with_name("prompt.txt").read_text("utf-8").strip()
    reply = client.chat.completions.create(model="gpt-4o", messages=[
        {"role": "system", "content": system}, {"role": "user", "content": question}])
    print(reply.choices[0].message.content)
    """
)
QUESTIONS = ("lima weather", "oslo weather")
RUN_LINE = re.compile(r"^\[(\d)/2\] ")


class LoggingAgent(Chats):
    """The suite tests' chat harness with an agent that logs before it asks."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        (self.code / "chat_agent.py").write_text(AGENT, "utf-8")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    with FakeLLMServer() as llm:
        found = LoggingAgent(tmp_path_factory.mktemp("parallel-output"), llm)
        traces = [found.record(q) for q in QUESTIONS]
        added = found.cli("suite", "add", "logging", *traces)
        assert added.returncode == 0, added.stderr
        yield found, dict(zip(QUESTIONS, traces, strict=True))


def _blocks(stderr: str) -> tuple[list[str], list[list[str]]]:
    """What came before the first run's line, and each run's block up to the summary."""
    before: list[str] = []
    blocks: list[list[str]] = []
    for line in stderr.splitlines():
        if line.startswith("suite logging:"):
            break
        if RUN_LINE.match(line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
        elif "fork_posix" not in line:  # gRPC's own notes as the replays fork: not a run's
            before.append(line)
    return before, blocks


def test_two_failing_runs_side_by_side_are_each_told_in_one_block(suite, tmp_path):
    found, traces = suite
    found.set_prompt("You are a converter. Be brief.")
    meet = tmp_path / "meet"
    meet.mkdir()
    done = found.cli("suite", "run", "logging", "-j", "2", MEET_DIR=str(meet))
    assert done.returncode == 1, done.stderr
    assert "suite logging: 0/2 runs passed" in done.stderr
    before, blocks = _blocks(done.stderr)
    assert before == [], done.stderr  # nothing of a run is written before its own line
    assert [int(RUN_LINE.match(b[0]).group(1)) for b in blocks] == [1, 2]
    told = {}
    for block in blocks:
        [question] = [q for q in QUESTIONS if f"{q} ({traces[q]}) diverged:" in block[0]]
        told[question] = block
        other = next(q for q in QUESTIONS if q != question)
        text = "\n".join(block)
        assert [line.strip() for line in block if "warming up" in line] == [
            f"agent {question}: warming up {step}/3" for step in (1, 2, 3)]
        assert other not in text, text  # none of the other run's lines
        assert sum("field body.messages[0].content:" in line for line in block) == 1, text
        assert sum("now:      'You are a converter. Be brief.'" in line for line in block) == 1
        assert block[-1].strip().startswith("cause: system prompt changed"), text
        assert sum(line.strip().startswith("rewind: replay diverged") for line in block) == 0
    assert set(told) == set(QUESTIONS)
