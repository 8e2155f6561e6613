"""A local API with one slow and one fast endpoint, for replays of calls made in parallel."""

from __future__ import annotations

import time

from tests.support.json_api import JsonAPI


class SlowAndFast(JsonAPI):
    """``GET /slow`` answers after 300 ms, ``GET /fast`` after 20 ms (``instant``: both at
    once), on 127.0.0.1."""

    def __init__(self, instant: bool = False) -> None:
        def answer(method: str, path: str, headers: dict[str, str], body: bytes):
            if not instant:
                time.sleep(0.3 if path.startswith("/slow") else 0.02)
            return 200, {"ok": True}

        super().__init__(answer)
