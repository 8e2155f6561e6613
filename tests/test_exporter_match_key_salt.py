"""``rewind.match_key`` is a hash of the whole request. In ``metadata`` mode, where the request
itself is not recorded, whoever reads spans must not be able to confirm a guessed prompt by
hashing it: the key is keyed with the deployment's ``REWIND_MATCH_KEY_SALT``, and without one
no key is recorded. ``full`` capture keeps the plain key, so its traces replay as before."""

from __future__ import annotations

import json

import openai
import pytest

from rewind import exporter
from rewind.exporter import tool
from rewind.exporter.core import canonical
from rewind.exporter.core.process_settings import ENV_MATCH_KEY_SALT
from rewind.exporter.providers.enrichment import match_key
from tests.support import wiretap

PROMPT = [{"role": "user", "content": "is my account 4417-1234 overdrawn?"}]
# What someone reading the spans would hash to test a guess: the request as the SDK sends it.
GUESS = match_key("POST", "/v1/chat/completions", {}, {"model": "m", "messages": PROMPT})
TOOL_GUESS = canonical.tool_key("lookup", {"account": "4417-1234"})


def record(fake_llm, mode: str) -> tuple[wiretap.Spans, dict, dict]:
    """One chat call and one tool call, the same in every run; the LLM and the tool span."""
    recorded = wiretap.Spans()
    exporter.instrument(tracer_provider=recorded.provider, capture=mode)

    @tool
    def lookup(account: str) -> str:
        return "balance 12.00"

    try:
        client = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key="k", max_retries=0)
        client.chat.completions.create(model="m", messages=PROMPT)
        lookup(account="4417-1234")
    finally:
        exporter.uninstrument()
    [llm] = recorded.llm()
    [tool_span] = recorded.named("execute_tool")
    return recorded, dict(llm.attributes), dict(tool_span.attributes)


def exported(recorded: wiretap.Spans) -> str:
    return json.dumps([dict(s.attributes) for s in recorded.finished()], default=str)


def test_full_capture_keeps_the_plain_key_replay_matches_on(fake_llm, monkeypatch):
    monkeypatch.setenv(ENV_MATCH_KEY_SALT, "deployment-secret")  # set, and ignored here
    _, llm, tool_span = record(fake_llm, "full")
    assert llm["rewind.match_key"] == GUESS
    assert tool_span["rewind.match_key"] == TOOL_GUESS


def test_metadata_without_a_salt_records_no_match_key(fake_llm, monkeypatch):
    monkeypatch.delenv(ENV_MATCH_KEY_SALT, raising=False)
    recorded, llm, tool_span = record(fake_llm, "metadata")
    assert "rewind.match_key" not in llm and "rewind.match_key" not in tool_span
    assert llm["gen_ai.usage.input_tokens"] > 0  # the metadata itself is still there
    dump = exported(recorded)
    assert GUESS not in dump and TOOL_GUESS not in dump and "4417" not in dump


def test_metadata_with_a_salt_records_a_key_a_guess_cannot_reproduce(fake_llm, monkeypatch):
    monkeypatch.setenv(ENV_MATCH_KEY_SALT, "deployment-secret")
    recorded, llm, tool_span = record(fake_llm, "metadata")
    _, again, _ = record(fake_llm, "metadata")
    monkeypatch.setenv(ENV_MATCH_KEY_SALT, "another-deployment")
    _, elsewhere, _ = record(fake_llm, "metadata")

    key = llm["rewind.match_key"]
    assert key == again["rewind.match_key"]  # equal requests still group together
    assert key != elsewhere["rewind.match_key"]  # a key from one deployment says nothing
    assert GUESS not in exported(recorded) and TOOL_GUESS not in exported(recorded)
    # Only with the secret can the operator find a known request's calls.
    assert key == canonical.salted_match_key(GUESS, b"deployment-secret")
    assert tool_span["rewind.match_key"] == canonical.salted_match_key(TOOL_GUESS,
                                                                       b"deployment-secret")


def test_the_salt_is_never_printed_with_the_settings():
    chosen = exporter.settings("metadata", environ={ENV_MATCH_KEY_SALT: "deployment-secret"})
    assert chosen.match_key_salt == b"deployment-secret"
    assert "deployment-secret" not in repr(chosen)


@pytest.mark.parametrize("mode", ["full", "content"])
def test_modes_that_carry_the_request_ignore_the_salt(mode):
    chosen = exporter.settings(mode, environ={ENV_MATCH_KEY_SALT: "s"})
    assert chosen.allowed({"rewind.match_key": GUESS})["rewind.match_key"] == GUESS
