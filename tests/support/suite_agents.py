"""Three agents and a service for the suite tests, the way a team's code looks: the weather
and travel agents (OpenAI) and the concierge (Anthropic) share the weather agent's loop; their
system prompts live in ``prompts.json`` beside the copy of this module a test runs, so a test
changes a prompt as a developer would, by editing that file. ``app`` serves ``POST /ask`` with
the weather agent. ``python suite_agents.py AGENT QUESTION`` prints the agent's answer."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.weather_agent import Clients, Knobs, WeatherAgent

PROMPTS_FILE = "prompts.json"
URL_VARIABLE = "SUITE_LLM_URL"  # where the model answers (the fake LLM in the tests)
PROMPTS = {"weather": "You are a weather assistant. Use the tools, answer in one sentence.",
           "travel": "You are a travel assistant. Suggest one thing to do.",
           "concierge": "You are a hotel concierge. Be polite."}


def prompts() -> dict[str, str]:
    found = Path(__file__).with_name(PROMPTS_FILE)
    return json.loads(found.read_text("utf-8")) if found.is_file() else PROMPTS


def answer(agent: str, question: str) -> str:
    provider = "anthropic" if agent == "concierge" else "openai"
    url = os.environ.get(URL_VARIABLE, "http://127.0.0.1:9")
    knobs = Knobs(provider=provider, system=prompts()[agent], question=question)
    return WeatherAgent(Clients(url), knobs).run()


async def ask(request: Request) -> JSONResponse:
    body = await request.json()
    return JSONResponse({"answer": await run_in_threadpool(answer, "weather", body["question"])})


app = Starlette(routes=[Route("/ask", ask, methods=["POST"])])

if __name__ == "__main__":
    print(answer(sys.argv[1], sys.argv[2]))
