"""OpenAPI description of the worker API, served at /openapi.json."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from rewind.collector.store.read.filters import RunFilters, TraceFilters, UsageFilters, query_name
from rewind.replay.assist import MCP_PATH
from rewind.replay.ui import listing
from rewind.replay.ui.assets import STATIC_FILES, STATIC_PREFIX
from rewind.replay.worker.auth_middleware import LOGIN_PATH, LOGOUT_PATH, TOKEN_COOKIE
from rewind.replay.worker.routes import analysis, traces

# What rewind.replay.cassette.ids.parse_trace_id accepts (upper case is lowered).
_TRACE_ID_SCHEMA = {"type": "string", "pattern": "^[0-9a-fA-F]{32}$"}
_TRACE_ID = {"name": "trace_id", "in": "path", "required": True, "schema": _TRACE_ID_SCHEMA}
_SESSION_ID = {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}}
_ERROR = {"description": "error", "content": {"application/json": {"schema": {
    "type": "object", "properties": {"error": {"type": "string"}}}}}}


# A replayed request: the body the provider's SDK sends (OpenAI chat/Responses/embeddings,
# Anthropic messages), matched against the recording as it is.
_PROVIDER_REQUEST = {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "description": "The request body the provider's SDK sends, as is",
    "properties": {"model": {"type": "string"}, "messages": {"type": "array"},
                   "input": {}, "stream": {"type": "boolean"}},
    "additionalProperties": True}}}}
# A divergence, in the error shape the caller's SDK reads (OpenAI's; Anthropic's for
# /messages), with x-should-retry: false so SDKs do not retry it.
_DIVERGED = {"description": "the request departs from the recording (what differs, at which "
             "step) or the session's run has used every recorded step",
             "headers": {"x-should-retry": {"schema": {"type": "string", "enum": ["false"]}}},
             "content": {"application/json": {"schema": {"type": "object", "properties": {
                 "type": {"type": "string"},
                 "error": {"type": "object", "properties": {
                     "message": {"type": "string"},
                     "type": {"type": "string", "enum": ["rewind_replay_divergence"]},
                     "code": {"type": "string"}}}}}}}}
SESSION_MODEL = (
    "Replay over HTTP: point an SDK's base URL at /replay/{trace_id}/v1 (OpenAI) or "
    "/replay/{trace_id} (Anthropic). That URL has one implicit session per trace and caller: "
    "each request takes the next recorded answer; a request the session cannot answer that "
    "the recording's first step answers starts a new run from the top (so runs one after "
    "another need nothing in between), and DELETE /v1/replay/sessions/{trace_id} resets it. "
    "For runs at the same time, POST /v1/replay/sessions makes an independent session (one "
    "run) served at /replay/s/{session_id}/. A divergence is a 409.")


def _query(name: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}


_KINDS = {"bool": "boolean", "int": "integer"}


def _filters(cls: type[TraceFilters | UsageFilters | RunFilters],
             limit: int | None = None) -> list[dict[str, Any]]:
    """The query parameters of a filters dataclass (``collector/store/read/filters.py``), as
    its fields name them; ``limit``: the route's largest."""
    params = []
    for item in fields(cls):
        schema: dict[str, Any] = {"type": _KINDS.get(str(item.type), "string")}
        if "datetime" in str(item.type):
            schema["description"] = "24h, 7d, now or an ISO 8601 time"
        if item.name == "limit" and limit:
            schema.update(minimum=1, maximum=limit)
        params.append({"name": query_name(item), "in": "query", "required": False,
                       "schema": schema})
    return params


def _trace_query(name: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": True, "schema": _TRACE_ID_SCHEMA}


def _op(summary: str, params: list[dict[str, Any]] | None = None, ok: str = "200",
        **extra: Any) -> dict[str, Any]:
    return {"summary": summary, "parameters": params or [],
            "responses": {ok: {"description": "ok"}, "400": _ERROR, "401": _ERROR,
                          "404": _ERROR}, **extra}


def _path_trace(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": _TRACE_ID_SCHEMA}


def _page(summary: str, params: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"get": _op(f"Web UI page (HTML): {summary}", params)}


def ui_paths() -> dict[str, Any]:
    """The web UI: its pages, the JSON they draw, the sign-in form, its static files."""
    public = {"summary": "Web UI file", "security": [],
              "responses": {"200": {"description": "ok"}}}
    return {
        "/": _page("recent runs"),
        "/traces/{trace_id}": _page("one run", [_TRACE_ID]),
        "/diff/{left}/{right}": _page("two runs aligned", [_path_trace("left"),
                                                           _path_trace("right")]),
        "/bisect/{good}/{bad}": _page("first divergence", [_path_trace("good"),
                                                           _path_trace("bad")]),
        "/suites": _page("every suite and how its last run went"),
        "/suites/{name}": _page("a suite's runs and their last results", [
            {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]),
        "/conversations/{conversation_id}": _page(
            "the runs of one conversation (gen_ai.conversation.id), turn by turn", [
                {"name": "conversation_id", "in": "path", "required": True,
                 "schema": {"type": "string"}}]),
        LOGIN_PATH: {"get": {**public, "summary": "Sign-in form (POST token=, next=, csrf=: "
                                                "sets the cookie the pages read with)"}},
        LOGOUT_PATH: {"post": {**public, "summary": "Sign-out (the button of a signed-in page: "
                                                    "forgets the cookie)",
                               "requestBody": {"content": {
                                   "application/x-www-form-urlencoded": {}}},
                               "responses": {"303": {"description": "to the sign-in form"},
                                             "403": {"description": "not this worker's own "
                                                                    "form (CSRF)"}}}},
        "/v1/ui/runs": {"get": _op("Runs page data", _filters(TraceFilters, listing.MAX_RUNS))},
        "/v1/ui/traces/{trace_id}": {"get": _op("Run page data: outline, totals, forks",
                                                [_TRACE_ID])},
        "/v1/ui/traces/{trace_id}/step": {"get": _op(
            "One span in full (index: its event number; default the first step)",
            [_TRACE_ID, _query("index")])},
        "/v1/ui/diff": {"get": _op("Diff page data", [_trace_query("left"),
                                                      _trace_query("right")])},
        "/v1/ui/bisect": {"get": _op("Bisect page data", [_trace_query("good"),
                                                          _trace_query("bad")])},
        **{STATIC_PREFIX + name: {"get": public} for name in STATIC_FILES},
    }


def openapi_document() -> dict[str, Any]:
    provider_path = {"name": "path", "in": "path", "required": True,
                     "schema": {"type": "string"}}

    def replayed(summary: str, params: list[dict[str, Any]]) -> dict[str, Any]:
        operation = _op(summary, params, requestBody=_PROVIDER_REQUEST)
        operation["responses"]["409"] = _DIVERGED
        return {"post": operation}

    created = {"description": "created", "content": {"application/json": {"schema": {
        "type": "object", "properties": {"session_id": {"type": "string"},
                                         "trace_id": _TRACE_ID_SCHEMA,
                                         "base_path": {"type": "string"},
                                         "clock": {"type": "string"},
                                         "clock_start": {"type": ["string", "null"],
                                                         "format": "date-time"}}}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Rewind worker API", "version": "1", "description": (
            "A bearer token mapped to a tenant reads, exports, compares and replays only that "
            "tenant's traces (another tenant's trace or session is a 404, as an unknown one "
            "is) and imports as that tenant; a token without a tenant sees every tenant. "
            f"Browsers sign in at {LOGIN_PATH}: the cookie it sets carries the token on reads "
            f"(GET, HEAD) of the pages and their /v1/ui/ data only, never of the API or of "
            f"/replay/. Wrong tokens back off: 429 with Retry-After. {SESSION_MODEL}")},
        "components": {"securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "cookie": {"type": "apiKey", "in": "cookie", "name": TOKEN_COOKIE}}},
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": {
            "/health": {"get": {"summary": "Liveness", "security": [],
                                "responses": {"200": {"description": "ok"}}}},
            "/v1/traces": {"get": _op("List recent traces (ReplaySource, ForkSource, "
                                      "ForkStep: what a replay or fork was made from; "
                                      "Inbound, Route, Status: a service's request or job)",
                                      _filters(TraceFilters, traces.MAX_LIMIT))},
            "/v1/traces/{trace_id}": {"get": _op("All spans of a trace", [_TRACE_ID])},
            "/v1/traces/{trace_id}/cassette": {"get": _op("The trace's cassette", [_TRACE_ID])},
            "/v1/replay/sessions": {"post": {**_op(
                "Start an independent replay session (one run) for a trace", ok="201",
                requestBody={"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["trace_id"],
                    "properties": {"trace_id": _TRACE_ID_SCHEMA,
                                   "speed": {"type": "number", "description": "answers with "
                                             "recorded latency divided by this"},
                                   "ignore": {"type": "array", "items": {"type": "string"},
                                              "description": "request paths (globs) whose "
                                              "values may differ, as --ignore"},
                                   "allow_live": {"type": "array", "items": {"type": "string"},
                                                  "description": "hosts (globs) whose "
                                                  "unrecorded calls that are no LLM call go "
                                                  "on to the recorded host, as --allow-live"},
                                   "clock": {"type": "string", "enum": ["recorded", "live"],
                                             "description": "the caller's clock: the "
                                             "recorded run's (from clock_start) or its own, "
                                             "as --clock"},
                                   "mode": {"type": "string", "enum": ["strict"]}}}}}}),
                "responses": {"201": created, "400": _ERROR, "401": _ERROR, "404": _ERROR}}},
            "/v1/replay/sessions/{session_id}": {
                "get": _op("Progress and first divergence of a session", [_SESSION_ID]),
                "delete": _op("Forget a session; with a trace id as session_id, reset the "
                              "trace's implicit session", [_SESSION_ID], ok="204"),
            },
            "/v1/traces/{trace_id}/export": {"get": _op(
                "The trace as a portable .rw file (422 if it carries a credential)",
                [_TRACE_ID])},
            "/v1/import": {"post": _op(
                "Load a .rw file, or every trace of an OTLP file, into the store (hash-checked, "
                "idempotent); answers trace_id (the first) and trace_ids",
                requestBody={"required": True, "content": {
                    "application/octet-stream": {"schema": {"type": "string",
                                                            "format": "binary"}}}})},
            "/v1/diff": {"get": _op("Two runs side by side, steps aligned", [
                _trace_query("left"), _trace_query("right")])},
            "/v1/bisect": {"get": _op("First diverging step and its likely cause", [
                _trace_query("good"), _trace_query("bad")])},
            "/v1/usage": {"get": _op("Calls and tokens per model and service; replays and "
                                     "forks only with include_replays=true",
                                     _filters(UsageFilters))},
            "/v1/usage/traces": {"get": _op(
                "Tokens, cost and unpriced or unreported calls of each trace named (1 to "
                f"{analysis.MAX_USAGE_TRACES} trace_id parameters; a trace without LLM calls "
                "is left out)", [{"name": "trace_id", "in": "query", "required": True,
                                  "schema": {"type": "array", "items": _TRACE_ID_SCHEMA},
                                  "style": "form", "explode": True}])},
            "/v1/runs": {"get": _op("Per-run facts for bisect over many runs (versions: "
                                    "comma-separated)", _filters(RunFilters, analysis.MAX_RUNS))},
            "/replay/{trace_id}/{path}": replayed(
                "Answer an OpenAI/Anthropic-compatible request from the trace's recording, in "
                "the trace's implicit session (a new run starts from the top)",
                [_TRACE_ID, provider_path]),
            "/replay/s/{session_id}/{path}": replayed(
                "Answer a request within an independent session", [_SESSION_ID,
                                                                   provider_path]),
            MCP_PATH: _mcp(),
            **ui_paths(),
            **suite_paths(),  # last: a walk of this document removes the suite at its end
        },
    }


def suite_paths() -> dict[str, Any]:
    """``rewind suite`` through a worker: the caller's tenant's suites."""
    name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}

    def body(properties: dict[str, Any]) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "properties": properties}}}}

    run = {"type": "object", "required": ["trace_id"], "properties": {
        "trace_id": _TRACE_ID_SCHEMA, "command": {"type": "array", "items": {"type": "string"}}}}
    return {
        "/v1/suites": {"get": _op("Every suite's definition")},
        "/v1/suites/{name}/results": {"post": _op(
            "Store what a suite run found, one result per run (RunResult.to_dict())", [name],
            requestBody=body({"results": {"type": "array", "items": {"type": "object"}}}))},
        "/v1/suites/{name}": {
            "get": _op("A suite's definition and its runs' last results", [name]),
            "put": _op("Save a suite's definition (every run one of the caller's traces)",
                       [name], requestBody=body({
                           "runs": {"type": "array", "items": run},
                           "query": {"type": "object", "description": "TraceFilters as query "
                                     "parameters"}, "sample": {"type": "integer"},
                           "evaluators": {"type": "array", "items": {"type": "string"}}})),
            "delete": _op("Remove a suite", [name]),
        },
    }


def _mcp() -> dict[str, Any]:
    """The assistant's tools: JSON-RPC messages of the Model Context Protocol (streamable
    HTTP), not REST; ``x-protocol`` says so to whatever walks this document."""
    message = {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "description": "A JSON-RPC message of MCP (tools/list, tools/call, "
        "resources/read, prompts/get, ...)"}}}}
    about = ("MCP server (streamable HTTP) for coding assistants: list_runs, get_run, "
             "get_step, search_runs, diff_runs, bisect_runs, bisect_between, usage_stats, "
             "export_run, over the caller's tenant's runs")
    return {"post": _op(about, requestBody=message, **{"x-protocol": "mcp"}),
            "get": _op("MCP: the server's event stream for a session", **{"x-protocol": "mcp"}),
            "delete": _op("MCP: end a session", **{"x-protocol": "mcp"})}
