"""The orders agent as a Flask (WSGI) app, for the WSGI side of the service replay tests:
``POST /chat`` asks the model (a sync ``OpenAI`` client) and reads the order over httpx.
``python -m tests.support.orders_flask PORT`` serves it with the standard library's server."""

from __future__ import annotations

import os
import signal
import sys
import threading
import uuid
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
from flask import Flask, jsonify, request

from tests.support.orders_service import API_URL, LLM_URL, MODEL, _system_prompt

app = Flask(__name__)


@app.get("/health")
def health() -> dict[str, bool]:
    return {"ok": True}


@app.post("/chat")
def chat() -> object:
    from openai import OpenAI

    body = request.get_json()
    order = httpx.get(f"{os.environ[API_URL]}/orders/{body['order']}", timeout=5).json()
    with OpenAI(base_url=os.environ[LLM_URL], api_key="test-key", max_retries=0) as llm:
        answer = llm.chat.completions.create(model=MODEL, messages=[
            {"role": "system", "content": _system_prompt()},
            {"role": "user", "content": f"{body['question']} {order}"}])
    return jsonify({"answer": answer.choices[0].message.content, "user": body["user"],
                    "request_id": str(uuid.uuid4())})


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    server = make_server("127.0.0.1", int(sys.argv[1]), app, handler_class=_Quiet)
    # SIGINT stops the server once the request in hand is answered: a KeyboardInterrupt raised
    # inside a request would be caught by wsgiref's handler and the server would go on.
    signal.signal(signal.SIGINT, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()
    print("server stopped", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
