"""Tenants for the tenancy tests: a store with the collector receivers and the worker app over
it, both with the same tokens (``tenancy``); agent runs sent through the real receivers (the
real OTLP/HTTP exporter, each tenant with its own token), and spans slipped into a trace id
the sender does not own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from starlette.testclient import TestClient

from rewind.collector.ingest.service import IngestHandle, start_ingest
from rewind.collector.store.server_settings import IngestOptions
from rewind.collector.store.store import Store
from rewind.exporter import agent, instrument, uninstrument
from rewind.replay.testing.fakellm import FakeLLMServer
from rewind.replay.worker.app import create_app
from tests.support.stores import migrated_store

# token -> tenant; a token without a tenant is an operator's
TOKENS: dict[str, str | None] = {"tok-a": "team-a", "tok-b": "team-b", "tok-op": None}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@dataclass
class Tenancy:
    """A fresh store, the collector receivers writing into it and the worker app reading it,
    both with :data:`TOKENS`; a fake LLM for the agent runs."""

    store: Store
    ingest: IngestHandle
    llm: FakeLLMServer
    client: TestClient


@contextmanager
def tenancy(directory: Path) -> Iterator[Tenancy]:
    store = migrated_store(directory / "store")
    ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0,
                                               spool_dir=directory / "spool",
                                               auth_tokens=TOKENS))
    try:
        with FakeLLMServer() as llm:
            yield Tenancy(store, ingest, llm, TestClient(create_app(store, tokens=TOKENS)))
    finally:
        ingest.stop()
        store.close()


def provider_for(http_url: str, token: str, service: str,
                 resource: dict[str, Any] | None = None) -> TracerProvider:
    """Spans of ``service`` exported as they end to the OTLP/HTTP receiver at ``http_url``."""
    exporter = OTLPSpanExporter(endpoint=f"{http_url}/v1/traces", headers=bearer(token))
    provider = TracerProvider(resource=Resource.create({"service.name": service,
                                                        **(resource or {})}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def chat_run(provider: TracerProvider, llm: FakeLLMServer, prompt: str = "hi") -> str:
    """One agent run under ``provider``: a root span ``run`` around one chat call through the
    instrumented OpenAI SDK; its trace id, once the provider is shut down (its spans sent)."""
    instrument(tracer_provider=provider)
    try:
        with provider.get_tracer("agent").start_as_current_span("run") as root:
            client = openai.OpenAI(base_url=llm.base_url + "/v1", api_key="k", max_retries=0)
            client.chat.completions.create(model="gpt-4o",
                                           messages=[{"role": "user", "content": prompt}])
            return format(root.get_span_context().trace_id, "032x")
    finally:
        uninstrument()
        provider.shutdown()


def send_run(ingest: IngestHandle, llm: FakeLLMServer, token: str, service: str,
             prompts: list[str], resource: dict[str, Any] | None = None,
             conversation: str | None = None) -> str:
    """One agent run (a root span, one chat call per prompt through the instrumented OpenAI
    SDK) sent with ``token``, written to the store, in ``conversation`` when given (an
    ``agent`` span around the calls); returns its trace id."""
    provider = provider_for(ingest.http_url, token, service, resource)
    instrument(tracer_provider=provider)
    try:
        with provider.get_tracer("tenants").start_as_current_span("run") as root, \
                agent("talk", conversation_id=conversation) if conversation else nullcontext():
            client = openai.OpenAI(base_url=llm.base_url + "/v1", api_key="k", max_retries=0)
            for text in prompts:
                client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": text}])
            trace_id = format(root.get_span_context().trace_id, "032x")
    finally:
        uninstrument()
        provider.shutdown()
    assert ingest.flush(), "the collector did not write what it acknowledged"
    return trace_id


def send_span_into(ingest: IngestHandle, token: str, service: str, trace_id: str,
                   name: str, attributes: dict[str, Any]) -> None:
    """A span in trace ``trace_id`` (as if continuing it), sent with ``token``."""
    provider = provider_for(ingest.http_url, token, service)
    parent = SpanContext(int(trace_id, 16), 0x1234, is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    context = trace.set_span_in_context(NonRecordingSpan(parent))
    with provider.get_tracer("tenants").start_as_current_span(name, context=context) as span:
        span.set_attributes(attributes)
    provider.shutdown()
    assert ingest.flush(), "the collector did not write what it acknowledged"
