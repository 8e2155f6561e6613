"""A local API with one slow and one fast endpoint, for replays of calls made in parallel."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SlowAndFast:
    """``GET /slow`` answers after 300 ms, ``GET /fast`` after 20 ms (``instant``: both at
    once), on 127.0.0.1."""

    def __init__(self, instant: bool = False) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not instant:
                    time.sleep(0.3 if self.path.startswith("/slow") else 0.02)
                body = b'{"ok": true}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> SlowAndFast:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
