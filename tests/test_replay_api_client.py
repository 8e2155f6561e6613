"""The one HTTP client of a process for a worker: the /health probe and the calls after it go
over one connection, and a worker that is gone is said so quickly."""

from __future__ import annotations

import json

from rewind.replay.sources.api_client import client_for
from rewind.replay.sources.locate import worker_reachable
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.ports import free_port

CHAT = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()


def test_the_probe_and_the_calls_after_it_share_one_connection():
    with FakeLLMServer() as server:
        assert not worker_reachable(server.base_url)  # it answers, but it is not a worker
        client = client_for(server.base_url)
        answers = [client.request("POST", "/v1/chat/completions", content=CHAT,
                                  headers={"content-type": "application/json"})
                   for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert answers[-1].json()["choices"][0]["message"]["content"] == "echo: hi"
        assert server.connections == 1
        assert client_for(server.base_url + "/") is client


def test_nothing_listening_is_not_a_worker():
    assert not worker_reachable(f"http://127.0.0.1:{free_port()}")
    assert not worker_reachable("not a url")
