"""A chat agent for the suite verdict tests, the way a team's script looks: four turns with the
real ``openai`` SDK against the fake LLM, printing the whole conversation (so what the command
printed is not its final answer), its system prompt in ``prompt.txt`` beside the script (a test
changes it as a developer would). ``Chats`` records it with the real ``rewind record`` into a
store, once per first question, and runs the CLI on that store."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind, user_env
from tests.support.ports import free_port

AGENT_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL")  # what the agent reads at start
PROMPT = "You are a unit converter. Answer with the number."
LATER_TURNS = ("And 30C?", "And 40C?", "Thanks, that is all.")
FINAL_ANSWER = f"echo: {LATER_TURNS[-1]}"
AGENT = textwrap.dedent(
    """\
    import sys
    from pathlib import Path

    import openai

    client = openai.OpenAI(max_retries=0)  # OPENAI_API_KEY, OPENAI_BASE_URL: the environment's
    system = Path(__file__).with_name("prompt.txt").read_text("utf-8").strip()
    messages = [{"role": "system", "content": system}]
    first = sys.argv[1] if len(sys.argv) > 1 else "25C in F?"
    for turn in [first, "And 30C?", "And 40C?", "Thanks, that is all."]:
        messages.append({"role": "user", "content": turn})
        print(f"user: {turn}")
        reply = client.chat.completions.create(model="gpt-4o", messages=messages)
        text = reply.choices[0].message.content
        messages.append({"role": "assistant", "content": text})
        print(f"assistant: {text}")
    """
)


class Chats:
    """The agent's code in ``base/code``, a store in ``base/store``, the fake LLM."""

    def __init__(self, base: Path, llm: FakeLLMServer) -> None:
        self.base = base
        self.code = base / "code"
        self.store = base / "store"
        self.llm = llm
        self.code.mkdir(parents=True, exist_ok=True)
        (self.code / "chat_agent.py").write_text(AGENT, "utf-8")
        self.set_prompt(PROMPT)
        self.port = free_port()  # where `rewind serve` would listen: nothing does
        self.traces: list[str] = []  # the recorded runs

    def set_prompt(self, prompt: str) -> None:
        (self.code / "prompt.txt").write_text(prompt + "\n", "utf-8")

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in user_env(self.store).items()
               if not k.startswith("OTEL_") and k not in AGENT_VARIABLES}
        env.update({"REWIND_GRPC_PORT": str(self.port), "OPENAI_API_KEY": "sk-test-chat",
                    "OPENAI_BASE_URL": self.llm.base_url + "/v1", **extra})
        return env

    def command(self, question: str) -> list[str]:
        return [sys.executable, "chat_agent.py", question]

    def record(self, question: str) -> str:
        """The agent run once under ``rewind record``: its trace id."""
        done = rewind("record", "--", *self.command(question), cwd=self.code, env=self.env())
        assert done.returncode == 0, done.stderr
        return next(line.split()[-1] for line in done.stderr.splitlines()
                    if line.startswith("rewind: recorded trace "))

    def cli(self, *args: str, cwd: Path | None = None, timeout: float = 600, **extra: str
            ) -> subprocess.CompletedProcess:
        """``rewind ARGS`` in the agent's folder (or ``cwd``: a changed copy of it)."""
        return rewind(*args, cwd=cwd or self.code, env=self.env(**extra), timeout=timeout)

