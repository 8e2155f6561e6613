"""The one HTTP client of a process for a worker: the /health probe and the calls after it go
over one connection, and a worker that is gone is said so quickly."""

from __future__ import annotations

import json
import socket
import threading

from rewind.replay.sources.api_client import ApiClient, client_for
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


def test_a_streamed_answer_is_read_whole_and_the_connection_kept():
    ask = json.loads(CHAT) | {"stream": True}
    with FakeLLMServer() as server:
        client = client_for(server.base_url)
        streamed = client.request("POST", "/v1/chat/completions", content=json.dumps(ask).encode(),
                                  headers={"content-type": "application/json"})
        after = client.request("POST", "/v1/chat/completions", content=CHAT,
                               headers={"content-type": "application/json"})
        assert server.connections == 1  # the next call went over the same connection
    events = [line for line in streamed.text.split("\n\n") if line]
    assert events[-1] == "data: [DONE]"  # every chunk read, the end of the stream included
    assert "".join(json.loads(e[6:])["choices"][0]["delta"].get("content") or ""
                   for e in events[:-1]) == "echo: hi"
    assert after.json()["choices"][0]["message"]["content"] == "echo: hi"


def test_an_answer_that_ends_with_its_connection_is_read_to_the_end():
    body = b'{"status": "ok"}'
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def answer_once() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"connection: close\r\n\r\n" + body)

        thread = threading.Thread(target=answer_once)
        thread.start()
        client = ApiClient(f"http://127.0.0.1:{listener.getsockname()[1]}")
        got = client.request("GET", "/health")
        thread.join(10)
    assert (got.status_code, got.json()) == (200, {"status": "ok"})
