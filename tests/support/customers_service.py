"""A service that reads databases before it asks the model, for the database replay tests: a
FastAPI app whose ``POST /chat`` loads the customer from PostgreSQL (psycopg, async), counts
the visit in Redis (redis-py, asyncio), then asks an ``AsyncOpenAI`` model with both in its
system prompt. No Rewind code: it is recorded under ``opentelemetry-instrument``.

``CUSTOMERS_WITH_BALANCE=1`` is a changed service: its query reads one more column;
``CUSTOMERS_AUDIT_PORT=N`` another: it first tells an audit service on that loopback port
over a plain socket (no client Rewind hooks).
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI

PG_DSN = "CUSTOMERS_PG_DSN"
REDIS_PORT = "CUSTOMERS_REDIS_PORT"
LLM_URL = "CUSTOMERS_LLM_URL"
WITH_BALANCE = "CUSTOMERS_WITH_BALANCE"
AUDIT_PORT = "CUSTOMERS_AUDIT_PORT"
APP = "tests.support.customers_service:app"
SCHEMA = ("CREATE TABLE customers (id int PRIMARY KEY, name text, plan text, balance numeric)",
          "INSERT INTO customers VALUES (7, 'Ada', 'gold', 12.50), (8, 'Bob', 'free', 0)")

app = FastAPI()


@app.post("/chat")
async def chat(body: dict[str, Any]) -> dict[str, Any]:
    import psycopg
    from openai import AsyncOpenAI
    from redis.asyncio import Redis

    if os.environ.get(AUDIT_PORT):
        import socket

        with socket.create_connection(("127.0.0.1", int(os.environ[AUDIT_PORT])), 5) as audit:
            audit.sendall(b"chat\n")
    columns = "name, plan, balance" if os.environ.get(WITH_BALANCE) else "name, plan"
    async with await psycopg.AsyncConnection.connect(os.environ[PG_DSN]) as conn:
        cur = await conn.execute(f"SELECT {columns} FROM customers WHERE id = %s",
                                 (body["customer"],))
        customer = await cur.fetchone()
    cache = Redis(port=int(os.environ[REDIS_PORT]), decode_responses=True)
    try:
        visits = await cache.incr(f"visits:{body['customer']}")
    finally:
        await cache.aclose()
    async with AsyncOpenAI(base_url=os.environ[LLM_URL], api_key="test-key",
                           max_retries=0) as llm:
        reply = await llm.chat.completions.create(model="gpt-4o-mini", messages=[
            {"role": "system", "content": f"The customer is {customer[0]} on the "
                                          f"{customer[1]} plan, visit {visits}."},
            {"role": "user", "content": body["question"]}])
    return {"answer": reply.choices[0].message.content, "customer": customer[0],
            "visits": visits}
