"""The wire tap the exporter tests compare against (``tests/support/wiretap.py``) sees each
exchange byte for byte."""

from __future__ import annotations

import httpx

from tests.support.wiretap import WireTap


def test_tap_sees_each_keep_alive_exchange_byte_for_byte(tap: WireTap) -> None:
    with httpx.Client(base_url=tap.base_url) as client:
        first = client.post("/v1/chat/completions", content=b'{"model":"m","messages":[]}')
        second = client.post("/v1/embeddings", json={"model": "e", "input": "hi"})
    seen = tap.exchanges()
    assert [e.target for e in seen] == ["/v1/chat/completions", "/v1/embeddings"]
    assert seen[0].request_body == b'{"model":"m","messages":[]}'
    assert seen[0].response_body == first.content and seen[0].status == 200
    assert seen[1].response_body == second.content
