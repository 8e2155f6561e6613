"""A support desk as a team runs it in production, for the verdict tests: a FastAPI app whose
``POST /support`` asks the model several times (each answer the next question), and whose
``POST /stream`` answers as server-sent events, one word of the model's answer per event. Its
configuration comes from the production environment, read at import (``LLM_BASE_URL``): a
replay without it is the app's own failure. ``wrapped`` is the same app inside
OpenTelemetry's ASGI middleware, as a team adds it by hand. No Rewind code.

What a test can change: ``SUPPORT_STEPS`` (how many calls a question takes: fewer is a run that
ends early) and ``SUPPORT_SIGNATURE`` (the stream's last event: an answer that differs with
every call the same).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from starlette.responses import StreamingResponse

LLM_URL = "LLM_BASE_URL"
STEPS = "SUPPORT_STEPS"
SIGNATURE = "SUPPORT_SIGNATURE"
MODEL = "gpt-4o-mini"
RECORDED_STEPS = 3
RECORDED_SIGNATURE = "-- the support desk"

BASE_URL = os.environ[LLM_URL]  # production configuration: no default

app = FastAPI()


async def _ask(llm: Any, question: str) -> str:
    answer = await llm.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": question}])
    return str(answer.choices[0].message.content)


def _client() -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=BASE_URL, api_key="test-key", max_retries=0)


@app.get("/health")
def health() -> dict[str, bool]:
    return {"ok": True}


@app.post("/support")
async def support(body: dict[str, Any]) -> dict[str, Any]:
    text = str(body["question"])
    steps = int(os.environ.get(STEPS, RECORDED_STEPS))
    async with _client() as llm:
        for _ in range(steps):
            text = await _ask(llm, text)
    return {"answer": text, "steps": steps}


@app.post("/stream")
async def stream(body: dict[str, Any]) -> StreamingResponse:
    async with _client() as llm:
        answer = await _ask(llm, str(body["question"]))
    words = [*answer.split(), os.environ.get(SIGNATURE, RECORDED_SIGNATURE)]

    async def events() -> AsyncIterator[str]:
        for index, word in enumerate(words):
            yield f"event: word\ndata: {json.dumps({'n': index, 'word': word})}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _wrapped() -> Any:
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    return OpenTelemetryMiddleware(app)


wrapped = _wrapped()
