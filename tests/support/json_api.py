"""One local JSON API on 127.0.0.1 for the runs tests record to call: each test says what it
answers (``answer(method, path, headers, body) -> (status, payload)``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, str, dict[str, str], bytes], tuple[int, Any]]


class JsonAPI:
    """Serves from construction (``port`` 0: any free one) until :meth:`close` or the end of a
    ``with`` block."""

    def __init__(self, answer: Answer, port: int = 0) -> None:
        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(size) if size else b""
                status, payload = answer(self.command, self.path,
                                         {k.lower(): v for k, v in self.headers.items()}, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> JsonAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
