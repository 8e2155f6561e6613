"""A service as an on-call engineer meets it, for the service replay tests: a FastAPI app whose
``POST /chat`` asks an ``AsyncOpenAI`` agent (today's date and a uuid in its system prompt)
that calls a ``get_order`` tool reading a local orders API over httpx (its job worker is
``orders_jobs``), and the orders API itself. No Rewind code: ``service_recording`` records it as
a user does.

Incidents it can plant: a wrong answer with HTTP 200 (the orders API says order 7 is
"delivered" when it is not: the agent repeats it), and an HTTP 500 (an order the API does not
know: the tool's 404 escapes). ``ORDERS_FIXED=1`` is the fixed service: the 404 becomes a 200
saying the order is unknown.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import date
from typing import Any

import httpx
from fastapi import FastAPI

from tests.support.json_api import JsonAPI

LLM_URL = "ORDERS_LLM_URL"
API_URL = "ORDERS_API_URL"
FIXED = "ORDERS_FIXED"
MODEL_ENV = "ORDERS_MODEL"  # another model: a changed service whose first call diverges
APP = "tests.support.orders_service:app"
JOB = "tests.support.orders_jobs:summarise_order"
MODEL = "gpt-4o-mini"
ORDERS = {"7": {"id": "7", "status": "delivered"}, "42": {"id": "42", "status": "shipped"}}
TOOLS = [{"type": "function", "function": {
    "name": "get_order", "description": "An order's status.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                   "required": ["id"]}}}]
# The fake model calls the tool for the order named in the question.
DRIFT = {f"order {key}": f'call get_order {{"id": "{key}"}}' for key in ("7", "42", "404")}

app = FastAPI()


def _system_prompt() -> str:
    return f"You answer about orders. Today is {date.today().isoformat()}. Request {uuid.uuid4()}."


async def _order_async(order_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=os.environ[API_URL], timeout=5) as client:
        response = await client.get(f"/orders/{order_id}")
        response.raise_for_status()
        return response.json()


@app.get("/health")
def health() -> dict[str, bool]:
    return {"ok": True}


@app.post("/chat")
async def chat(body: dict[str, Any]) -> dict[str, Any]:
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=os.environ[LLM_URL], api_key="test-key",
                           max_retries=0) as llm:
        return await _answer(llm, body)


async def _answer(llm: Any, body: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": _system_prompt()},
                                      {"role": "user", "content": body["question"]}]
    model = os.environ.get(MODEL_ENV, MODEL)
    first = await llm.chat.completions.create(model=model, messages=messages, tools=TOOLS)
    message = first.choices[0].message
    if message.tool_calls:
        call = message.tool_calls[0]
        try:
            order = await _order_async(json.loads(call.function.arguments)["id"])
        except httpx.HTTPStatusError:
            if os.environ.get(FIXED):
                return {"answer": "I do not know this order.", "user": body["user"]}
            raise
        messages += [message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps(order)}]
        final = await llm.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = final.choices[0].message
    return {"answer": message.content, "user": body["user"], "request_id": str(uuid.uuid4())}


class OrdersAPI(JsonAPI):
    """``GET /orders/{id}`` on 127.0.0.1: the order, or 404."""

    def __init__(self) -> None:
        def answer(method: str, path: str, headers: dict[str, str], body: bytes):
            order = ORDERS.get(path.rsplit("/", 1)[-1])
            return (200, order) if order else (404, {"error": "not found"})

        super().__init__(answer)
