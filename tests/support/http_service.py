"""A local HTTP API for a run's tools to call (weather, search): each answer carries a counter
and the time, so an answer given live during a replay differs from the recorded one."""

from __future__ import annotations

import json
import threading
import time
from urllib.parse import parse_qs, urlsplit

from tests.support.json_api import JsonAPI


class ToolService(JsonAPI):
    """``GET /weather?city=`` and ``POST /search`` on 127.0.0.1; ``calls`` counts requests."""

    def __init__(self) -> None:
        self.calls = 0
        lock = threading.Lock()

        def answer(method: str, path: str, headers: dict[str, str], body: bytes):
            if method == "POST":
                payload = {"query": json.loads(body or b"{}").get("q"), "hits": 3}
            else:
                payload = {"city": parse_qs(urlsplit(path).query).get("city", ["?"])[0],
                           "sky": "rain"}
            with lock:
                self.calls += 1
                return 200, {**payload, "served": self.calls, "at": time.time()}

        super().__init__(answer)

    @property
    def base_url(self) -> str:
        return self.url
