"""The MCP server: Rewind's tools, resources and prompt for a coding assistant.

One server for both transports: ``rewind mcp`` runs it over stdio with the CLI's source (a
worker when one answers, else the store), and the worker serves it over streamable HTTP at
``/mcp``, where each call reads through the caller's tenant view. ``source_for`` gives the
source of one call; ``local`` says the server runs on the user's machine: only then may a tool
run a command (``replay_run``, ``fork_run``: only those the user allowed, ``allowed.py``) or
write a file (``export_run``: only a new one, under the folder it was given). Each tool says
what it does in MCP annotations: the reads are read-only, the two that run a command
destructive and open-world.

A tool fails as a tool error whose text says what to do (our errors carry the fix; a bad
argument names it and what it accepts, ``arguments.py``); anything else is reported by the SDK
as a failed call, never a stopped server. Answers are compact JSON text: an assistant pays for
every character.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from rewind.exporter.core.errors import RewindError
from rewind.replay.assist import contrast, reads
from rewind.replay.assist.allowed import Allowance, ExportFolder
from rewind.replay.assist.arguments import RewindServer
from rewind.replay.assist.long_runs import ForkAsk, ReplayAsk, fork, in_thread, replay
from rewind.replay.assist.paging import MAX_PAGE_CHARS, PAGE_CHARS, dumps
from rewind.replay.assist.prompts import DEBUG_INCIDENT, INSTRUCTIONS
from rewind.replay.sources.trace_sources import TraceSource
from rewind.replay.timetravel.groups.run_groups import GROUP_BY
from rewind.replay.timetravel.stats import GROUPINGS

SourceFor = Callable[[Context], TraceSource]
READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
# A command may do anything its program does, and a fork's live steps reach the network.
RUNS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                       open_world_hint=True)
# export_run creates a new file and never replaces one.
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                         open_world_hint=False)

TraceRef = Annotated[str, Field(min_length=1, description=(
    "A trace id (32 hex characters) or a unique prefix of one, as list_runs gives them"))]
Offset = Annotated[int, Field(ge=0, description="Where to start: the next_offset of the "
                                                "previous page (0 for the first)")]
Since = Annotated[str | None, Field(description="Runs started at or after: '24h', '7d', "
                                               "'30m' ago, or an ISO time")]
Until = Annotated[str | None, Field(description="Runs started at or before (same forms)")]
Service = Annotated[str | None, Field(description="Only runs of this service")]
Command = Annotated[list[str], Field(description=(
    "The program to run, as an argument list, e.g. ['python', 'agent.py']; it runs only if "
    "the user allowed it when starting the server (--allow-command). Leave it out to run the "
    "command `rewind record` saved with the run, which runs when recorded on this machine"))]
Ignore = Annotated[list[str], Field(description=(
    "Request fields whose value may differ from the recording (globs over the paths a "
    "divergence names, e.g. 'body.metadata.*')"))]
Timeout = Annotated[float, Field(gt=0, le=3600, description="Seconds before the command is "
                                                             "stopped")]


def guarded(fn: Callable[..., Any], kind: type[ToolError | ResourceError] = ToolError,
            answer: Callable[[Any], Any] = lambda value: value) -> Callable[..., Any]:
    """Our errors become tool (or resource) errors with the fix in words; ``answer`` is what
    the result is given as."""

    def failed(error: RewindError) -> Exception:
        where = f" (argument {error.field})" if error.field else ""
        fix = f" Fix: {error.hint}" if error.hint else ""
        return kind(f"{error}{where}.{fix}")

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return answer(await fn(*args, **kwargs))
            except RewindError as error:
                raise failed(error) from error
        return run_async

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return answer(fn(*args, **kwargs))
        except RewindError as error:
            raise failed(error) from error
    return run


def build_server(source_for: SourceFor, local: bool, allowance: Allowance | None = None,
                 export: ExportFolder | None = None) -> MCPServer:
    """The tools over ``source_for``; with ``local``, also those that run the commands
    ``allowance`` lets run and write new files under ``export``."""
    server = RewindServer("rewind", instructions=INSTRUCTIONS, log_level="WARNING")

    def tool(annotations: ToolAnnotations = READ) -> Callable[[Callable[..., Any]], Any]:
        def register(fn: Callable[..., Any]) -> Any:
            server.add_tool(guarded(fn, answer=dumps), annotations=annotations,
                            structured_output=False)
            return fn
        return register

    @tool()
    def list_runs(ctx: Context, service: Service = None,
                  errors: Annotated[bool, Field(description="Only runs with an error")] = False,
                  model: Annotated[str | None, Field(description="Only runs calling this "
                                                                 "model")] = None,
                  text: Annotated[str | None, Field(description="Only runs saying this "
                                                                "anywhere (any case)")] = None,
                  since: Since = None, until: Until = None,
                  route: Annotated[str | None, Field(description=(
                      "Requests a service served: only those whose route contains this, "
                      "e.g. 'POST /orders'"))] = None,
                  status: Annotated[str | None, Field(description=(
                      "Requests: only this HTTP status (e.g. '500'); jobs: 'ok' or the "
                      "exception type"))] = None,
                  include_replays: Annotated[bool, Field(description=(
                      "Also runs Rewind made from other runs: replays (suite runs among "
                      "them) and forks"))] = False,
                  limit: Annotated[int, Field(ge=1, le=reads.MAX_LISTED)] = 20,
                  offset: Offset = 0) -> dict[str, Any]:
        """List recorded runs (traces), newest first: id, service, start, duration, spans,
        LLM calls, errors, and for a service's requests the route and status. Replays and
        forks are left out unless include_replays. `total` counts every matching run; when
        `next_offset` is not null, call again with offset=next_offset for more. Start here
        to find the incident's trace id."""
        query = reads.RunQuery(service, errors, model, text, since, until, route, status,
                               include_replays)
        return reads.list_runs(source_for(ctx), query, limit, offset)

    @tool()
    def get_run(ctx: Context, trace_id: TraceRef,
                all_events: Annotated[bool, Field(description=(
                    "Every span (agents, framework spans), not only model and tool steps"))]
                = False,
                limit: Annotated[int, Field(ge=1, le=reads.MAX_OUTLINE)] = 100,
                offset: Offset = 0) -> dict[str, Any]:
        """Outline of one run: totals (calls, tokens, cost, duration, errors), lineage (the
        run it was replayed or forked from), and its steps in order, one row each under
        `columns`: step, kind, name, status, milliseconds, [input, output] tokens and cost
        (model calls), and a short preview (a failed step: its error). Read a step in full
        with get_step."""
        return reads.get_run(source_for(ctx), trace_id, all_events, limit, offset)

    @tool()
    def get_step(ctx: Context, trace_id: TraceRef,
                 step: Annotated[int, Field(ge=0, description="The step number get_run "
                                                              "shows")],
                 raw: Annotated[bool, Field(description=(
                     "Also the exchange as sent over the wire: method, URL, headers, bodies"))]
                 = False,
                 offset: Annotated[int, Field(ge=0, description=(
                     "Character offset into the content: content.next_offset of the previous "
                     "page"))] = 0,
                 max_chars: Annotated[int, Field(ge=1, le=MAX_PAGE_CHARS)] = PAGE_CHARS,
                 ) -> dict[str, Any]:
        """One step: its header (kind, name, status; model, tokens and cost for a model
        call; the error when it failed), then everything the model saw and answered there (a
        tool step: its call and result) as JSON text in content.text, one page at a time:
        when content.next_offset is not null, call again with offset=next_offset."""
        return reads.get_step(source_for(ctx), trace_id, step, raw, offset, max_chars)

    @tool()
    def search_runs(ctx: Context,
                    text: Annotated[str, Field(min_length=1, description=(
                        "Words to find in what the models were sent or answered"))],
                    service: Service = None, since: Since = None, until: Until = None,
                    limit: Annotated[int, Field(ge=1, le=reads.MAX_SEARCHED)] = 5,
                    ) -> dict[str, Any]:
        """Find runs whose prompts or answers say some text; each with the steps that say it
        and a snippet around it, newest first."""
        query = reads.RunQuery(service=service, since=since, until=until)
        return reads.search_runs(source_for(ctx), text, query, limit)

    @tool()
    def diff_runs(ctx: Context, left: TraceRef, right: TraceRef,
                  changed_only: Annotated[bool, Field(description="Leave out steps that are "
                                                                  "the same")] = True,
                  limit: Annotated[int, Field(ge=1, le=contrast.MAX_DIFF_STEPS)] = 50,
                  offset: Offset = 0) -> dict[str, Any]:
        """Two runs side by side, steps aligned (an inserted retry does not shift the rest):
        per step same/changed/inserted/removed and the request and answer fields that
        differ."""
        return contrast.diff(source_for(ctx), left, right, changed_only, limit, offset)

    @tool()
    def bisect_runs(ctx: Context,
                    good: Annotated[str, Field(min_length=1, description="A run that went "
                                                                         "right (trace id)")],
                    bad: Annotated[str, Field(min_length=1, description="The run that went "
                                                                        "wrong (trace id)")],
                    ) -> dict[str, Any]:
        """The first step where the bad run departed from the good one, its likely cause
        (prompt, model, params, tools, a tool's result, the model's answer...) and both
        values of each differing field."""
        return contrast.first_divergence(source_for(ctx), good, bad)

    @tool()
    def bisect_between(ctx: Context,
                       start: Annotated[str, Field(min_length=1, description=(
                           "A time ('7d', ISO) or the good service version"))],
                       end: Annotated[str, Field(min_length=1, description=(
                           "A time ('now', ISO) or the bad service version"))],
                       by: Annotated[Literal[GROUP_BY], Field(  # type: ignore[valid-type]
                           description="What to group runs by")] = "service.version",
                       service: Service = None,
                       limit: Annotated[int, Field(ge=1, le=100_000)] = 1000,
                       ) -> dict[str, Any]:
        """Over many runs: group them (by service version, model or system prompt) across a
        time range or two versions, with each group's failure rate and commonest answer,
        and what changed between neighbouring groups."""
        return contrast.between(source_for(ctx), start, end, by, service, limit)

    @tool()
    def usage_stats(ctx: Context, since: Annotated[str, Field(description=(
                        "Start: '24h', '7d' ago, or an ISO time"))] = "24h",
                    until: Until = None, service: Service = None,
                    by: Annotated[Literal[tuple(GROUPINGS)], Field(  # type: ignore[valid-type]
                        description="Group by model, service or both")] = "both",
                    include_replays: Annotated[bool, Field(description=(
                        "Count replays and forks too"))] = False) -> dict[str, Any]:
        """LLM calls, tokens, errors, latency and cost per model and service over a
        period."""
        return reads.usage_stats(source_for(ctx), since, until, service, by, include_replays)

    if local:
        _local_tools(server, tool, source_for, allowance or Allowance(),
                     export or ExportFolder(Path.cwd()))
    else:
        @tool()
        def export_run(ctx: Context, trace_id: TraceRef) -> dict[str, Any]:
            """Where to download the run as a portable .rw file (rewind export's format):
            GET the path on this worker with the same token."""
            source = source_for(ctx)
            whole = reads.resolve(source, trace_id)
            source.spans(whole)  # a run the caller cannot see is not found
            return {"trace_id": whole, "download": f"/v1/traces/{whole}/export"}

    _resources(server, source_for)
    return server


def _local_tools(server: MCPServer, tool: Callable[..., Any], source_for: SourceFor,
                 allowance: Allowance, export: ExportFolder) -> None:
    """What only a server on the user's machine offers: it runs the commands they allowed,
    writes new files in their folder."""

    @tool(WRITES)
    def export_run(ctx: Context, trace_id: TraceRef,
                   path: Annotated[str | None, Field(description=(
                       "A new file, or a directory, inside the server's export folder "
                       "(default: <trace id>.rw there)"))] = None,
                   ) -> dict[str, Any]:
        """Write a run to a portable .rw file (every span, compressed; refused when the run
        carries a credential); returns its path. Only a new file, only inside the folder
        the server exports to. Replay or diff it anywhere."""
        return reads.export_run(source_for(ctx), trace_id, path, export)

    @tool(RUNS)
    async def replay_run(ctx: Context, trace_id: TraceRef, command: Command = [],  # noqa: B006
                         strict: Annotated[bool, Field(description=(
                             "Stop at the first divergence (else it and what follows go "
                             "live)"))] = True,
                         allow_live: Annotated[list[str], Field(description=(
                             "Hosts (globs) whose unrecorded HTTP calls may go out"))] = [],  # noqa: B006
                         ignore: Ignore = [],  # noqa: B006
                         clock: Literal["recorded", "real"] = "recorded",
                         timeout: Timeout = 600.0) -> dict[str, Any]:
        """Run a command with every LLM call answered from the recorded run (no call reaches
        the network) and return the report: calls replayed, live, connections refused, and
        the first divergence (step, reason, differing fields). Runs only a command the user
        allowed. Long: reports progress and can be cancelled."""
        source = source_for(ctx)
        ask = ReplayAsk(trace_id, list(command), strict, tuple(allow_live), tuple(ignore),
                        clock, timeout)
        return await in_thread(lambda: replay(source, ask, allowance), _progress(ctx),
                               "replay")

    @tool(RUNS)
    async def fork_run(ctx: Context, trace_id: TraceRef,
                       step: Annotated[int, Field(ge=0, description="The step to fork at")],
                       command: Command = [],  # noqa: B006
                       user_message: Annotated[str | None, Field(description=(
                           "Replaces the last user message of the step's request"))] = None,
                       system_message: Annotated[str | None, Field(description=(
                           "Replaces the system prompt from the step on"))] = None,
                       answer: Annotated[str | None, Field(description=(
                           "The model's answer at the step, in place of the recorded "
                           "one"))] = None,
                       tool_result: Annotated[str | None, Field(description=(
                           "The tool step's result (JSON or text)"))] = None,
                       http_response_body: Annotated[str | None, Field(description=(
                           "The answer of the HTTP call at the step"))] = None,
                       http_status: Annotated[int | None, Field(ge=100, le=599)] = None,
                       model: Annotated[str | None, Field(description=(
                           "Model for this step and after"))] = None,
                       params: Annotated[dict[str, Any], Field(description=(
                           "Sampling params for this step and after, e.g. "
                           "{'temperature': 0}"))] = {},  # noqa: B006
                       endpoint: Annotated[str | None, Field(description=(
                           "OTLP endpoint for the new run (default: the usual one)"))] = None,
                       ignore: Ignore = [],  # noqa: B006
                       timeout: Timeout = 600.0) -> dict[str, Any]:
        """Re-run a command with the steps before `step` answered from the recorded run, the
        edit applied at `step`, and everything after it live; the new run is recorded with
        its lineage. Returns the new trace id, calls replayed/live, and its diff with the
        source. Runs only a command the user allowed. Long: reports progress and can be
        cancelled."""
        source = source_for(ctx)
        ask = ForkAsk(trace_id, step, list(command), user_message, tool_result, http_response_body,
                      http_status, model, dict(params), endpoint, tuple(ignore), timeout,
                      system_message, answer)
        return await in_thread(lambda: fork(source, ask, allowance), _progress(ctx), "fork")


def _progress(ctx: Context) -> Callable[[float, str], Any]:
    async def report(done: float, message: str) -> None:
        await ctx.report_progress(done, None, message)
    return report


def _resources(server: MCPServer, source_for: SourceFor) -> None:
    @server.resource("rewind://runs/{trace_id}", mime_type="application/json",
                     description="A run's outline (get_run's first page)")
    def run_resource(trace_id: str, ctx: Context) -> str:
        return dumps(guarded(reads.get_run, ResourceError)(source_for(ctx), trace_id, False,
                                                           100, 0))

    @server.resource("rewind://runs/{trace_id}/steps/{step}", mime_type="application/json",
                     description="One step's content (get_step's first page)")
    def step_resource(trace_id: str, step: str, ctx: Context) -> str:
        if not step.isdigit():
            raise ResourceError(f"step must be a step number, got {step!r}")
        return dumps(guarded(reads.get_step, ResourceError)(source_for(ctx), trace_id,
                                                            int(step), False, 0, PAGE_CHARS))

    @server.prompt("debug_incident", description="Debug this incident: find the run, replay "
                   "it, bisect it against a good one, fork it with a fix")
    def debug_incident(symptom: str, trace_id: str = "", command: str = "") -> str:
        return DEBUG_INCIDENT.format(symptom=symptom, trace_id=trace_id or "(not known yet)",
                                     command=command or "(ask the user how the agent is run)")
