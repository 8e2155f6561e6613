"""Rewind's errors are one tree under ``RewindError``, and the built-in base a program around
the library may catch stays: a bad trace id or price file is still a ``ValueError``, a missing
trace a ``LookupError``, an unreachable worker an ``OSError``."""

from __future__ import annotations

import pytest

from rewind.collector.store.prices import parse_prices
from rewind.exporter.core.errors import RewindError
from rewind.replay.cassette.ids import TraceNotFound, parse_trace_id
from rewind.replay.sources.api_client import client_for
from tests.support.ports import free_port


def test_a_bad_trace_id_is_a_value_error_and_ours():
    with pytest.raises(ValueError, match="must be 32 hex characters") as raised:
        parse_trace_id("nope")
    assert isinstance(raised.value, RewindError)
    assert (raised.value.exit_code, raised.value.http_status) == (2, 400)


def test_a_bad_price_file_is_a_value_error_and_ours():
    with pytest.raises(ValueError, match=r"prices\.json") as raised:
        parse_prices("{not json", "prices.json")
    assert isinstance(raised.value, RewindError)


def test_a_missing_trace_is_a_lookup_error_naming_the_trace():
    error = TraceNotFound("ab" * 16)
    assert isinstance(error, LookupError) and isinstance(error, RewindError)
    assert (error.trace_id, error.http_status) == ("ab" * 16, 404)


def test_an_unreachable_worker_is_an_os_error_and_ours():
    with pytest.raises(OSError) as raised:  # a free port: nothing listens there
        client_for(f"http://127.0.0.1:{free_port()}").request("GET", "/health", timeout=1.0)
    assert isinstance(raised.value, RewindError)
