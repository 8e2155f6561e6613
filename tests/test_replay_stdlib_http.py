"""Calls made through the standard library (``urllib.request``, ``http.client``) and through
urllib3 used directly are recorded like httpx's, an LLM call among them, and replayed byte for
byte with the service and the model stopped. requests, which sends over urllib3 over
``http.client``, is still one span per call: the outermost hook records it."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support.harness import record_script
from tests.support.http_service import ToolService

AGENT = textwrap.dedent(
    """
    import http.client, json, os, urllib.request
    from urllib.parse import urlsplit
    import requests, urllib3
    from rewind.exporter import agent, instrument

    instrument(service_name="stdlib-agent")
    api, llm = os.environ["TOOL_URL"], os.environ["LLM_URL"]

    with agent("stdlib") as span:
        open(os.environ["TRACE_FILE"], "w").write(format(span.get_span_context().trace_id, "032x"))
        print("urllib:", urllib.request.urlopen(api + "/weather?city=Lima").read())
        parts = urlsplit(api)
        conn = http.client.HTTPConnection(parts.hostname, parts.port)
        conn.request("POST", "/search", body=json.dumps({"q": "umbrellas"}),
                     headers={"content-type": "application/json"})
        answer = conn.getresponse()
        print("http.client:", answer.status, answer.read())
        conn.request("GET", "/weather?city=Oslo")  # the same connection again
        print("again:", conn.getresponse().read())
        print("urllib3:", urllib3.PoolManager().request("GET", api + "/weather?city=Rome").data)
        print("requests:", requests.get(api + "/weather", params={"city": "Quito"}).content)
        body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
        asked = urllib.request.Request(llm + "/v1/chat/completions", data=body.encode(),
                                       headers={"content-type": "application/json",
                                                "authorization": "Bearer sk-secret-123"})
        print("llm:", urllib.request.urlopen(asked).read())
    """
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    with ToolService() as service:
        recording = record_script(tmp_path_factory.mktemp("stdlib"), AGENT, 7,
                                  TOOL_URL=service.base_url)
    recording.service_calls = service.calls
    yield recording
    recording.served.stop()


def test_each_call_is_one_span_with_its_exchange(recorded):
    assert recorded.service_calls == 5
    calls = sorted((s for s in recorded.spans if s["SpanAttributes"].get("rewind.kind")),
                   key=lambda s: int(s["SpanAttributes"]["rewind.step"]))
    urls = [s["SpanAttributes"]["rewind.request.url"] for s in calls]
    assert [u.rsplit("/", 1)[1] for u in urls] == [
        "weather?city=Lima", "search", "weather?city=Oslo", "weather?city=Rome",
        "weather?city=Quito", "completions"]
    assert [s["SpanAttributes"]["rewind.kind"] for s in calls] == ["http"] * 5 + ["llm"]
    search = calls[1]["SpanAttributes"]
    assert json.loads(search["rewind.request.body"]) == {"q": "umbrellas"}
    assert json.loads(search["rewind.response.body"])["hits"] == 3
    assert calls[5]["SpanName"] == "chat gpt-4o"
    assert all("sk-secret-123" not in json.dumps(s["SpanAttributes"]) for s in recorded.spans)


def test_replay_gives_the_same_bytes_with_the_service_and_the_model_stopped(recorded):
    done = recorded.replay()
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.output  # counters and times of the live answers included
    assert "replayed 6/6" in done.stderr and "0 live calls" in done.stderr
