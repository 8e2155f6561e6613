"""The weather agent the time-travel tests record, replay and fork: the real ``openai`` or
``anthropic`` SDK against fakellm, with one ``@tool``. Knobs change what a run does (system
prompt, model, tool list, params, tool output, an agent-level retry, more user turns).

Kept light (``anthropic`` is imported only when used) because forked runs start it as a child
process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import openai

from rewind.exporter import tool

if TYPE_CHECKING:
    import anthropic

SYSTEM = "You are a weather assistant. Use the tools, answer in one sentence."
QUESTION = "What is the weather in Paris?"
TOOL_DOCS = {"get_weather": "Current weather of a city.", "get_forecast": "Tomorrow's weather."}


@dataclass
class Knobs:
    provider: str = "openai"
    system: str = SYSTEM
    model: str | None = None
    tools: tuple[str, ...] = ("get_weather",)
    params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0})  # OpenAI only
    question: str = QUESTION
    weather: dict[str, str] = field(default_factory=lambda: {"Paris": "sunny"})
    retry: bool = False  # the agent asks its first question twice
    traced_tool: bool = True  # False: the tool is a plain function (no tool span)
    turns: tuple[str, ...] = ()  # more user turns after the first answer


class Clients:
    """SDK clients for one fakellm, made once (building a client costs a TLS context)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._openai: openai.OpenAI | None = None
        self._anthropic: anthropic.Anthropic | None = None

    @property
    def openai(self) -> openai.OpenAI:
        if self._openai is None:
            self._openai = openai.OpenAI(base_url=self.base_url + "/v1",
                                         api_key="sk-test-agent", max_retries=0)
        return self._openai

    @property
    def anthropic(self) -> anthropic.Anthropic:
        if self._anthropic is None:
            import anthropic

            self._anthropic = anthropic.Anthropic(base_url=self.base_url,
                                                  api_key="sk-ant-test-agent", max_retries=0)
        return self._anthropic


class WeatherAgent:
    """The agent under test; ``tool_runs`` counts real executions of the tool."""

    def __init__(self, clients: Clients, knobs: Knobs) -> None:
        self.clients = clients
        self.knobs = knobs
        self.tool_runs = 0

        def get_weather(city: str) -> dict:
            self.tool_runs += 1
            return {"city": city, "sky": knobs.weather.get(city, "unknown")}

        self.get_weather = tool(get_weather) if knobs.traced_tool else get_weather

    def run(self) -> str:
        if self.knobs.provider == "anthropic":
            return self._anthropic()
        return self._openai()

    def _openai(self) -> str:
        k = self.knobs
        client = self.clients.openai
        specs = [{"type": "function", "function": {
            "name": name, "description": TOOL_DOCS[name], "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}}}}
            for name in k.tools]
        messages: list[dict[str, Any]] = [{"role": "system", "content": k.system},
                                          {"role": "user", "content": k.question}]
        answers = []
        pending = list(k.turns)
        asked_twice = not k.retry
        for _ in range(8):
            reply = client.chat.completions.create(
                model=k.model or "gpt-4o", messages=messages, tools=specs, **k.params)
            if not asked_twice:
                asked_twice = True
                reply = client.chat.completions.create(
                    model=k.model or "gpt-4o", messages=messages, tools=specs, **k.params)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if message.tool_calls:
                for call in message.tool_calls:
                    result = self.get_weather(**json.loads(call.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": json.dumps(result)})
                continue
            answers.append(message.content or "")
            if not pending:
                break
            messages.append({"role": "user", "content": pending.pop(0)})
        return " | ".join(answers)

    def _anthropic(self) -> str:
        k = self.knobs
        client = self.clients.anthropic
        specs = [{"name": name, "description": TOOL_DOCS[name], "input_schema": {
            "type": "object", "properties": {"city": {"type": "string"}}}} for name in k.tools]
        messages: list[dict[str, Any]] = [{"role": "user", "content": k.question}]
        for _ in range(4):
            reply = client.messages.create(model=k.model or "claude-haiku-4-5", max_tokens=256,
                                           system=k.system, messages=messages, tools=specs)
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                return "".join(b.text for b in reply.content if b.type == "text")
            messages.append({"role": "assistant",
                             "content": [b.model_dump() for b in reply.content]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use.id,
                 "content": json.dumps(self.get_weather(**use.input))} for use in uses]})
        return ""
