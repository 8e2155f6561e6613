"""The transport's one responder slot: one object answers sync and async clients."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from rewind.exporter.capture import transport

URL = "http://127.0.0.1:9/v1/chat/completions"  # nothing listens on the discard port


def test_one_responder_answers_sync_and_async_clients_until_it_is_taken_out():
    asked = []

    def responder(flavor, request, asynchronous):
        asked.append((flavor.name, request.method, asynchronous))
        return flavor.module.Response(200, json={"answered": "async" if asynchronous else "sync"},
                                      request=request)

    async def post_async():
        async with httpx.AsyncClient() as client:
            return (await client.post(URL, json={})).json()

    previous = transport.set_responder(responder)
    try:
        with httpx.Client() as client:
            assert client.post(URL, json={}).json() == {"answered": "sync"}
        assert asyncio.run(post_async()) == {"answered": "async"}
    finally:
        assert transport.set_responder(previous) is responder
    assert asked == [("httpx", "POST", False), ("httpx", "POST", True)]
    assert transport.hooks.responder is previous
    with httpx.Client() as client, pytest.raises(httpx.ConnectError):
        client.post(URL, json={})
    assert len(asked) == 2


def test_a_responder_returning_none_lets_the_request_through():
    seen = []

    def responder(flavor, request, asynchronous):
        seen.append(asynchronous)
        return None

    previous = transport.set_responder(responder)
    try:
        with httpx.Client() as client, pytest.raises(httpx.ConnectError):
            client.post(URL, json={})
    finally:
        transport.set_responder(previous)
    assert seen == [False]
