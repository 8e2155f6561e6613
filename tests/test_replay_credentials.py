"""Credential screening of trace files: every way a key got past it once is refused on export
and on import (nothing stored), the message says where and what without the key, and
ordinary recordings still travel."""

from __future__ import annotations

import base64
import json

import pytest

from rewind.collector.store.read import reader
from rewind.replay.sources import archive
from rewind.replay.sources.archive import CredentialInTrace
from rewind.replay.sources.credentials import attribute_findings, span_findings
from tests.support.trace_files import TRACE, chat_spans, tampered

# Made-up keys, assembled so that no file holds one whole.
OPENAI = "sk-" + "proj-" + "Zq8vN3kL0pW7xR2mT5yB9cD4"
AWS_ID = "AKIA" + "Q3EXAMPLE7KD9PLM2X"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG" + "/bPxRfiCYzq8vN3kL0p"  # 40 characters
GITHUB = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"
SLACK = "xoxb-" + "284726195034-2847261950341-aBcDeFgHiJkLmNoPqRsTuVwX"
JWT = ".".join([
    base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()).decode(),
    base64.urlsafe_b64encode(json.dumps({"sub": "user-42", "exp": 1900000000}).encode()).decode(),
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
]).replace("=", "")
PRIVATE_KEY = ("-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUA\n"
               "-----END OPENSSH PRIVATE KEY-----")
CUSTOM = "c0ffee-5e55-10n-7f3a"


def attrs(span: dict) -> dict:
    return span["SpanAttributes"]


# (change to the second span, where the message points, what it says, the secret)
BYPASSES = {
    "base64 body": (
        lambda s: attrs(s).update({
            "rewind.request.body": base64.b64encode(
                b"\xff\xfe" + json.dumps({"api_key": OPENAI}).encode()).decode(),
            "rewind.request.body_encoding": "base64"}),
        "SpanAttributes['rewind.request.body']", "OpenAI-style API key (sk-pro…)", OPENAI),
    "JSON-escaped": (
        lambda s: attrs(s).update({"rewind.request.body": json.dumps(
            {"messages": [{"role": "user", "content": "use " + OPENAI}]}).replace(
            "sk-proj", "sk-\\u0070roj")}),
        "SpanAttributes['rewind.request.body']", "OpenAI-style API key (sk-pro…)", OPENAI),
    "URL-encoded": (
        lambda s: attrs(s).update({"rewind.request.body": "grant=client&api_key=" + "".join(
            f"%{ord(c):02X}" for c in OPENAI)}),
        "SpanAttributes['rewind.request.body']", "OpenAI-style API key (sk-pro…)", OPENAI),
    "x-custom-token header": (
        lambda s: attrs(s).update({"rewind.request.headers": json.dumps(
            {"content-type": "application/json", "x-custom-token": CUSTOM})}),
        "SpanAttributes['rewind.request.headers']", "x-custom-token header", CUSTOM),
    "openai-api-key header": (
        lambda s: attrs(s).update({"http.request.header.openai_api_key": json.dumps([CUSTOM])}),
        "SpanAttributes['http.request.header.openai_api_key']", "openai-api-key header", CUSTOM),
    "AWS secret key": (
        lambda s: attrs(s).update({"gen_ai.input.messages": json.dumps(
            [{"role": "user", "content": f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}"}])}),
        "SpanAttributes['gen_ai.input.messages']", "AWS secret access key (wJalrX…)",
        AWS_SECRET),
    "key as span name": (
        lambda s: s.update(SpanName=f"chat {OPENAI}"),
        "SpanName", "OpenAI-style API key (sk-pro…)", OPENAI),
    "key as attribute name": (
        lambda s: attrs(s).update({OPENAI: "1"}),
        "SpanAttributes: an attribute name", "OpenAI-style API key (sk-pro…)", OPENAI),
    "key as event name": (
        lambda s: s.update(EventNames=[GITHUB]),
        "EventNames[0]", "GitHub Token (ghp…)", GITHUB),
    "key as scope name": (
        lambda s: s.update(ScopeName=AWS_ID),
        "ScopeName", "AWS Access Key (AKIAQ3…)", AWS_ID),
    "Slack token": (
        lambda s: attrs(s).update({"rewind.tool.result": f"posted with {SLACK}"}),
        "SpanAttributes['rewind.tool.result']", "Slack Token (xoxb-2…)", SLACK),
    "JWT": (
        lambda s: s["EventAttributes"][0].update({"session": f"token={JWT}"}),
        "Events[0].Attributes['session']", "JSON Web Token (eyJhbG…)", JWT),
    "private key block": (
        lambda s: s["ResourceAttributes"].update({"deploy.key": PRIVATE_KEY}),
        "ResourceAttributes['deploy.key']", "Private Key (BEGIN …)", PRIVATE_KEY),
    # base64 and base64url text with no body_encoding to say so, as secret scanners read it
    "base64 body without a marker": (
        lambda s: attrs(s).update({"rewind.request.body": base64.b64encode(
            json.dumps({"api_key": OPENAI}).encode()).decode()}),
        "SpanAttributes['rewind.request.body']", "OpenAI-style API key (sk-pro…)", OPENAI),
    "base64 inside a message": (
        lambda s: attrs(s).update({"gen_ai.input.messages": json.dumps([{
            "role": "user", "content": "config: " + base64.b64encode(
                f"GITHUB_TOKEN={GITHUB}\n".encode()).decode()}])}),
        "SpanAttributes['gen_ai.input.messages']", "GitHub Token (ghp…)", GITHUB),
    "base64url without padding in a tool result": (
        lambda s: attrs(s).update({"rewind.tool.result": "state=" + base64.urlsafe_b64encode(
            f"??>{SLACK}~~".encode()).decode().rstrip("=") + "&ok=1"}),
        "SpanAttributes['rewind.tool.result']", "Slack Token (xoxb-2…)", SLACK),
    "base64 inside base64": (
        lambda s: s["EventAttributes"][0].update({"payload": base64.b64encode(
            base64.b64encode(f"key: {OPENAI}".encode())).decode()}),
        "Events[0].Attributes['payload']", "OpenAI-style API key (sk-pro…)", OPENAI),
}


@pytest.mark.parametrize("case", list(BYPASSES))
def test_export_refuses_it_naming_span_field_and_kind_but_not_the_key(case):
    change, where, what, secret = BYPASSES[case]
    spans = chat_spans()
    change(spans[1])
    with pytest.raises(CredentialInTrace) as refused:
        archive.pack(TRACE, spans)
    message = str(refused.value)
    assert f"refusing to export trace {TRACE}: it carries credentials" in message
    assert "span 53995c3f42cd8ad8 (" in message
    assert f"{where}: {what}" in message, message
    assert secret not in message


@pytest.mark.parametrize("case", list(BYPASSES))
def test_import_refuses_it_and_stores_nothing(case, store):
    change, where, what, secret = BYPASSES[case]
    clean = archive.pack(TRACE, chat_spans())
    data = tampered(clean, lambda document: change(document["spans"][1]))
    with pytest.raises(CredentialInTrace) as refused:
        archive.import_into(store, data)
    message = str(refused.value)
    assert f"refusing to import trace {TRACE}" in message
    assert f"{where}: {what}" in message, message
    assert secret not in message
    assert reader.get_trace(store, TRACE) == []
    assert archive.import_into(store, clean).written == 2  # the same file without it goes in


def test_a_span_named_with_a_key_is_not_named_in_full_by_the_message():
    spans = chat_spans()
    spans[0]["SpanName"] = OPENAI
    findings = span_findings(spans[0])
    assert [f.where for f in findings] == ["SpanName"]
    assert findings[0].describe() == ("span 00f067aa0ba902b7 (sk-pro…) SpanName: "
                                      "OpenAI-style API key (sk-pro…)")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("rewind.response.headers", json.dumps({"x-ratelimit-remaining-tokens": "29000",
                                                "anthropic-ratelimit-input-tokens-limit": "1"})),
        ("rewind.request.headers", json.dumps({"idempotency-key": "stainless-python-retry-1"})),
        ("rewind.request.body", base64.b64encode(bytes(range(256))).decode()),
        ("gen_ai.input.messages", "the sha256 is " + "ab" * 32 + " and the id is "
         "4bf92f3577b34da6a3ce929d0e0e4736; see https://example.com/a%20b?q=1%2B1"),
        ("gen_ai.output.messages", "JSON escapes like \\u00e9t\\u00e9 and \\\\n are text"),
        ("gen_ai.input.messages", base64.b64encode(b"an ordinary sentence, base64 encoded, "
                                                   b"says nothing secret").decode()),
        ("rewind.tool.result", "ids " + "9f86d081884c7d659a2feaa0c55ad015" * 3 + " "
         + base64.urlsafe_b64encode(bytes(range(200))).decode()),
    ],
)
def test_ordinary_values_are_not_taken_for_credentials(name, value):
    encoding = "base64" if name == "rewind.request.body" else None
    assert attribute_findings(name, value, encoding) == []


def test_the_suites_recordings_carry_no_finding(parcel_recording):
    """A real agent run, recorded through `rewind serve`: nothing in it looks like a key."""
    assert [f.describe() for s in parcel_recording.spans for f in span_findings(s)] == []
