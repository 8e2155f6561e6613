"""The orders service's job worker: ``summarise_order`` is a job (``@job``: each call its own
trace, its arguments and its result or exception recorded), and ``python -m
tests.support.orders_jobs ID...`` runs it once per order, as a queue consumer would."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx

from rewind.exporter import job
from tests.support.orders_service import API_URL, LLM_URL, MODEL, _system_prompt


def _order(order_id: str) -> dict[str, Any]:
    response = httpx.get(f"{os.environ[API_URL]}/orders/{order_id}", timeout=5)
    response.raise_for_status()
    return response.json()


@job
def summarise_order(order_id: str) -> dict[str, Any]:
    """One order summarised by the model (sync client), raising ValueError for an order the
    API does not know."""
    from openai import OpenAI

    try:
        order = _order(order_id)
    except httpx.HTTPStatusError as error:
        raise ValueError(f"no order {order_id}") from error
    with OpenAI(base_url=os.environ[LLM_URL], api_key="test-key", max_retries=0) as llm:
        answer = llm.chat.completions.create(model=MODEL, messages=[
            {"role": "system", "content": _system_prompt()},
            {"role": "user", "content": f"summarise {json.dumps(order)}"}])
    return {"order": order_id, "summary": answer.choices[0].message.content}


def main() -> None:
    for order_id in sys.argv[1:]:
        try:
            print(summarise_order(order_id))
        except ValueError as error:
            print("failed:", error)


if __name__ == "__main__":
    main()
