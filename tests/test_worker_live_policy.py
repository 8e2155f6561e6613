"""A worker with tokens goes live only where its operator allows: a tenant's crafted recording
cannot make it call an arbitrary host, and the caller's worker token never leaves with a live
call. Without tokens (loopback, the user is the operator) sessions go live as they ask."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store
from tests.support.json_api import JsonAPI
from tests.support.listed_runs import record_one_chat, worker_on

TOKEN = "tok-operator-7f3a9c"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One chat call recorded into a store; the host it called, now gone."""
    store = Store(f"chdb://{tmp_path_factory.mktemp('live') / 'store'}")
    migrate(store)
    yield store, *record_one_chat(store, "live-policy")
    store.close()


@contextmanager
def upstream(port: int) -> Iterator[list[dict[str, str]]]:
    """The host the recording called, back up: answers ``GET /v1/models``, noting headers."""
    seen: list[dict[str, str]] = []

    def answer(method: str, path: str, headers: dict[str, str], body: bytes):
        seen.append(headers)
        return 200, {"object": "list", "data": [
            {"id": "live-model", "object": "model", "created": 0, "owned_by": "x"}]}

    with JsonAPI(answer, port):
        yield seen


def session(url: str, trace_id: str, hosts: list[str], token: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{url}/v1/replay/sessions", headers=headers,
                      json={"trace_id": trace_id, "allow_live": hosts})


def models(url: str, made: httpx.Response, token: str) -> list[str]:
    client = openai.OpenAI(base_url=f"{url}{made.json()['base_path']}/v1", api_key=token,
                           max_retries=0)
    return [m.id for m in client.models.list()]


def test_with_tokens_and_no_hosts_listed_no_session_goes_live(recorded, monkeypatch):
    store, trace_id, host, _port = recorded
    monkeypatch.delenv("REWIND_WORKER_LIVE_HOSTS", raising=False)
    with worker_on(store, tokens={TOKEN: None}) as url:
        refused = session(url, trace_id, [host], TOKEN)
        assert refused.status_code == 403
        assert "REWIND_WORKER_LIVE_HOSTS (none)" in refused.text
        assert session(url, trace_id, [], TOKEN).status_code == 201  # replay alone still works


def test_a_listed_host_gets_the_live_call_without_the_callers_token(recorded, monkeypatch):
    store, trace_id, host, port = recorded
    monkeypatch.setenv("REWIND_WORKER_LIVE_HOSTS", "127.0.0.*")
    with worker_on(store, tokens={TOKEN: None}) as url, upstream(port) as seen:
        made = session(url, trace_id, [host], TOKEN)
        assert made.status_code == 201, made.text
        assert models(url, made, TOKEN) == ["live-model"]
    assert len(seen) == 1
    assert "authorization" not in seen[0] and TOKEN not in json.dumps(seen)


def test_a_host_the_operator_did_not_list_is_refused_at_the_call(recorded, monkeypatch):
    store, trace_id, host, port = recorded
    monkeypatch.setenv("REWIND_WORKER_LIVE_HOSTS", "api.example.com")
    with worker_on(store, tokens={TOKEN: None}) as url, upstream(port) as seen:
        made = session(url, trace_id, ["*"], TOKEN)
        assert made.status_code == 201, made.text
        with pytest.raises(openai.PermissionDeniedError, match=f"api.example.com\\), not {host}"):
            models(url, made, TOKEN)
    assert seen == []


def test_without_tokens_the_session_goes_live_as_it_asks(recorded, monkeypatch):
    store, trace_id, host, port = recorded
    monkeypatch.delenv("REWIND_WORKER_LIVE_HOSTS", raising=False)
    with worker_on(store) as url, upstream(port) as seen:
        made = session(url, trace_id, [host], None)
        assert models(url, made, "sk-user") == ["live-model"]
    assert seen[0]["authorization"] == "Bearer sk-user"
