"""A local HTTP API for a run's tools to call (weather, search): each answer carries a counter
and the time, so an answer given live during a replay differs from the recorded one."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class ToolService:
    """``GET /weather?city=`` and ``POST /search`` on 127.0.0.1; ``calls`` counts requests."""

    def __init__(self) -> None:
        service = self
        self.calls = 0
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, payload: dict) -> None:
                with service._lock:
                    service.calls += 1
                    payload = {**payload, "served": service.calls, "at": time.time()}
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                self._answer({"city": query.get("city", ["?"])[0], "sky": "rain"})

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                asked = json.loads(self.rfile.read(size) or b"{}")
                self._answer({"query": asked.get("q"), "hits": 3})

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ToolService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
