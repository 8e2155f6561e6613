"""A bug in the worker is not the caller's error: a 500 whose body carries an error id, and
the log line with that id holds the traceback (the real app and store, the store's reads of
the traces made to fail with an exception that is none of Rewind's errors)."""

from __future__ import annotations

import logging

import pytest
from starlette.testclient import TestClient

from rewind.replay.worker.app import create_app

FAULT = "provoked fault in the store"


@pytest.fixture
def broken_store(store, monkeypatch):
    query = store.query

    def fault(sql, parameters=None):
        if "rewind_traces" in sql:
            raise RuntimeError(FAULT)
        return query(sql, parameters)

    monkeypatch.setattr(store, "query", fault)
    return store


def test_a_bug_answers_500_with_an_id_the_log_holds_with_the_traceback(broken_store, caplog):
    client = TestClient(create_app(broken_store))
    with caplog.at_level(logging.ERROR, logger="rewind.worker"):
        answer = client.get("/v1/traces")
    assert answer.status_code == 500
    body = answer.json()
    error_id = body["error_id"]
    assert error_id in body["error"] and "internal error" in body["error"]
    assert FAULT not in answer.text  # what broke stays in the log, not in the answer
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert len(logged) == 1
    assert logged[0].exc_info is not None and logged[0].exc_info[0] is RuntimeError
    assert "Traceback (most recent call last)" in caplog.text
    assert f"RuntimeError: {FAULT}" in caplog.text


def test_each_bug_gets_its_own_id(broken_store):
    client = TestClient(create_app(broken_store))
    ids = {client.get("/v1/traces").json()["error_id"] for _ in range(2)}
    assert len(ids) == 2


def test_a_callers_error_is_still_a_4xx_without_an_id(store):
    answer = TestClient(create_app(store)).get("/v1/traces", params={"limit": "many"})
    assert answer.status_code == 400
    assert answer.json() == {"error": "limit must be an integer, got 'many'"}
