"""A cassette: the ordered interactions of one trace, and its JSON document. Pure: no I/O.

``build.py`` makes one from stored spans. This module is what a replayed process and the CLI
load, so it imports nothing of the building side (span decoding, answer synthesis).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import RewindError
from rewind.replay.cassette.inbound import Inbound, RecordedBodies

# The exporter's body decoding and canonical forms are loaded by the methods that use them:
# the CLI only passes a cassette on to the replayed process.

CASSETTE_VERSION = 1


class CassetteError(RewindError, ValueError):
    """A span or cassette document that cannot be used; the message names which."""

    http_status = 422  # the stored trace cannot be made into a cassette


@dataclass
class Interaction(RecordedBodies):
    step: int
    kind: str
    span_id: str
    name: str
    match_key: str
    method: str
    url: str
    request_headers: dict[str, str]
    request_body: str
    status: int = 200
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: str | None = None
    response_events: list[tuple[int, str]] | None = None
    request_body_encoding: str | None = None
    response_body_encoding: str | None = None
    # Interactions known only from semantic-convention content (see synthesis.py).
    semantic_key: str = ""
    semantic: dict[str, Any] | None = None
    synthetic: dict[str, Any] | None = None
    provider: str = ""
    # Tool and database calls: the recorded error, as JSON {"type", "message"} (gRPC calls:
    # {"code", "details"}).
    tool_error: str | None = None
    message_type: str = ""  # gRPC calls: the request message's protobuf name ('': unknown)
    # When the call was in flight, in ns from the run's start (both 0: unknown), and the
    # interaction it was made inside ("": none), so that calls in flight together are answered
    # in the order they completed (``waits_for``).
    start_offset_ns: int = 0
    end_offset_ns: int = 0
    within: str = ""

    @property
    def streamed(self) -> bool:
        return self.response_events is not None

    def response_attributes(self) -> dict[str, Any] | None:
        """The recorded LLM response read with the exporter's decoders (model, output, usage);
        None when the URL is no LLM endpoint."""
        from rewind.exporter.providers import bodies

        body = None if self.response_events is not None else self.response_bytes()
        return bodies.recorded_response_attributes(self.url, body, self.response_events)

    def canonical_request(self) -> dict[str, Any]:
        """What a divergence is diffed against: the request, or its semantic form."""
        if self.semantic is not None:
            return self.semantic
        from rewind.exporter.core import canonical

        if self.kind == A.KIND_TOOL:
            return {"tool": self.tool_name, "arguments": canonical.parse_body(self.request_body)}
        if self.kind == A.KIND_DB:
            return canonical.parse_body(self.request_body)
        if self.kind == A.KIND_RPC:  # decoded here: where the program's message types are known
            from rewind.exporter.rpc.protobuf_form import rpc_form

            return rpc_form(self.method, self.request_bytes(), self.message_type)
        if self.kind == A.KIND_HTTP:
            return canonical.canonical_http(self.method, self.url, self.request_headers,
                                            self.request_bytes())
        return canonical.canonical_request(
            self.method, self.url, self.request_headers, self.request_bytes()
        )

    def content_key(self) -> str:
        """The match key this host makes of the recorded request: what replaces a key stored
        by rules of another version (``KeyVersions``), so both sides are keyed alike."""
        from rewind.exporter.core import canonical

        if self.kind == A.KIND_RPC:  # keyed by the message's bytes, as the exporter keys it
            from rewind.exporter.rpc.rpc_calls import rpc_key

            return rpc_key(self.method, self.request_bytes())
        if self.kind == A.KIND_TOOL:
            return canonical.tool_key(self.tool_name, self.request_body)
        return canonical.match_key(self.canonical_request())

    @property
    def tool_name(self) -> str:
        return self.name.removeprefix("execute_tool ")


@dataclass(frozen=True)
class KeyVersions:
    """Match keys a recording stored under rules of another version than this host's
    (``canonical.MATCH_KEY_VERSION``), or of none: replaced by keys made here from the
    recorded requests, and said in the replay's report rather than left to looser matching."""

    recorded: tuple[str, ...]  # the versions on the spans; "": none (recorded before versions)
    replay: str  # this host's
    recomputed: int  # keys made here from the recorded request
    changed: int  # of those, keys other than the stored one
    kept: int = 0  # stored keys kept: the request itself was not recorded

    def describe(self, trace_id: str) -> str:
        """One line for the user: both versions, and what came of it."""
        versions = " and ".join(f"version {v}" if v else "no version (recorded before keys "
                                "carried one)" for v in self.recorded)
        line = (f"match keys of trace {trace_id} were stored with {versions}, this replay "
                f"makes version {self.replay}: {self.recomputed} recomputed from the recorded "
                f"requests ({self.changed} differ from the stored ones)")
        if self.kept:
            line += (f"; {self.kept} kept as stored (their request was not recorded, so they "
                     "may not match: record again to replay them strictly)")
        return line

    def to_dict(self) -> dict[str, Any]:
        return {"recorded": list(self.recorded), "replay": self.replay,
                "recomputed": self.recomputed, "changed": self.changed, "kept": self.kept}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeyVersions:
        return cls(recorded=tuple(str(v) for v in data.get("recorded") or ()),
                   replay=str(data.get("replay", "")), recomputed=int(data.get("recomputed") or 0),
                   changed=int(data.get("changed") or 0), kept=int(data.get("kept") or 0))



# -- which answers wait for which ----------------------------------------------------------
# Calls in flight together completed in some order when recorded; a replay answers at once, so
# without waiting, the call sent first would finish first and a program that acts on
# completion order (appending results as they come) would send something else next. The
# waiting itself is the replay session's.


@dataclass(frozen=True)
class Wait:
    """What one answer waits for: the answers released before it, and how long after the last
    of them it completed when recorded (ns)."""

    first: frozenset[str]
    gap_ns: int


def waits_for(interactions: Iterable[Interaction]) -> dict[str, Wait]:
    """For each interaction (by span id) that must wait, the interactions whose answers are
    released first: those that were in flight with it and completed before it.

    Only calls the replayed program makes itself take part: one made inside another recorded
    call (an HTTP call inside a tool) is not made again when that call is answered, so nothing
    waits for it. Calls of unknown timing wait for nothing and are waited for by nothing.
    """
    timed = sorted((i for i in interactions
                    if not i.within and i.end_offset_ns > i.start_offset_ns >= 0),
                   key=lambda i: i.start_offset_ns)
    waits: dict[str, Wait] = {}
    for index, answer in enumerate(timed):
        first = [other for other in _in_flight_with(timed, index)
                 if other.end_offset_ns < answer.end_offset_ns]
        if first:
            last = max(other.end_offset_ns for other in first)
            waits[answer.span_id] = Wait(frozenset(other.span_id for other in first),
                                         answer.end_offset_ns - last)
    return waits


def _in_flight_with(timed: list[Interaction], index: int) -> Iterable[Interaction]:
    """The interactions of ``timed`` (sorted by start) whose time in flight overlaps that of
    ``timed[index]``: scanning stops at the first one that starts after it ended."""
    answer = timed[index]
    for other in timed[:index]:
        if other.end_offset_ns > answer.start_offset_ns:
            yield other
    for other in timed[index + 1:]:
        if other.start_offset_ns >= answer.end_offset_ns:
            return
        yield other


@dataclass
class Skipped:
    span_id: str
    name: str
    reason: str


@dataclass
class Cassette:
    trace_id: str
    interactions: list[Interaction]
    skipped: list[Skipped] = field(default_factory=list)
    version: int = CASSETTE_VERSION
    # Spans that describe a call another span stands for (calls.py): span id -> that span's id.
    shadows: dict[str, str] = field(default_factory=dict)
    # When the recorded run started (epoch ns; 0: unknown): the replayed clock starts here.
    started_ns: int = 0
    # The request (or job) the trace is the unit of work of, from its root span; None: a script.
    inbound: Inbound | None = None
    # The command that ran it, as `rewind record` saved it (process.command_args); []: unknown.
    command: list[str] = field(default_factory=list)
    # The signature saved beside it (rewind.command.signature): only a command this machine
    # signed runs unasked (sources/commands.py); '': none.
    command_signature: str = ""
    # Recorded through the proxy (rewind.proxy.upstreams): endpoint prefix -> upstream base
    # URL; a replay goes through the proxy too. {}: recorded in process.
    proxy_upstreams: dict[str, str] = field(default_factory=dict)
    # Recorded with HTTPS interception (rewind.proxy.intercept): host -> endpoint prefix; a
    # replay intercepts those hosts again. {}: none.
    proxy_intercept: dict[str, str] = field(default_factory=dict)
    # Calls that never got an answer (a replay that stopped at a divergence, a transport
    # error), with the request as made: never replayed; diff and bisect show where a run
    # stopped and what it asked there (``timetravel.diff.steps_of``).
    unanswered: list[Interaction] = field(default_factory=list)
    # Stored match keys of another version, replaced by keys made here (``KeyVersions``);
    # None: the stored keys are this host's own.
    match_keys: KeyVersions | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cassette:
        version = data.get("version")
        if version != CASSETTE_VERSION:
            raise CassetteError(
                f"cassette version {version!r} is not supported (expected {CASSETTE_VERSION})"
            )
        try:
            interactions = [_interaction(item) for item in data["interactions"]]
            skipped = [Skipped(**item) for item in data.get("skipped", [])]
            return cls(str(data["trace_id"]), interactions, skipped,
                       shadows=dict(data.get("shadows") or {}),
                       started_ns=int(data.get("started_ns") or 0),
                       inbound=Inbound.from_dict(data["inbound"]) if data.get("inbound")
                       else None,
                       command=[str(word) for word in data.get("command") or []],
                       command_signature=str(data.get("command_signature") or ""),
                       proxy_upstreams={str(k): str(v) for k, v in
                                        (data.get("proxy_upstreams") or {}).items()},
                       proxy_intercept={str(k): str(v) for k, v in
                                        (data.get("proxy_intercept") or {}).items()},
                       unanswered=[_interaction(i) for i in data.get("unanswered") or []],
                       match_keys=KeyVersions.from_dict(data["match_keys"])
                       if data.get("match_keys") else None)
        except (KeyError, TypeError) as error:
            raise CassetteError(f"malformed cassette document: {error}") from error


def _interaction(item: Mapping[str, Any]) -> Interaction:
    return Interaction(**{**item, "response_events": [tuple(e) for e in item["response_events"]]
                          if item.get("response_events") is not None else None})
