"""A replay session: one cassette being played back, whatever carries the requests.

Used in-process (``player.py``, at the HTTP client transports and ``@tool``) and over HTTP (the
worker's ``replay_sessions.py``, for agents in any language). It decides, for each request,
which recorded interaction answers it (a :data:`Decision`), and keeps the tally the run's
report is made of; what a match sends back, and when, is in ``recorded/`` (shapes, ordering).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

from rewind.exporter import providers
from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.exporter.core.process_settings import host_matches
from rewind.replay.cassette.model import Cassette, Interaction, waits_for
from rewind.replay.cassette.volatile import Tolerance
from rewind.replay.play.divergence import Divergence
from rewind.replay.play.recorded.matching import Asked, Matcher
from rewind.replay.play.replay_settings import (
    CLOCK_LIVE,
    CLOCK_RECORDED,
    LENIENT,
    STRICT,
    Clock,
    ReplayMode,
    clock,
    replay_mode,
)
from rewind.replay.play.report import ReplayReport

if TYPE_CHECKING:  # loaded at the first answer (``_ordering``): not part of every start-up
    from rewind.replay.play.recorded.ordering import Hold, Order

@dataclass(frozen=True)
class Replayed:
    """The recorded interaction answers the request."""

    interaction: Interaction


@dataclass(frozen=True)
class Diverged:
    """The recording does not answer the request: the run departs from it here."""

    divergence: Divergence


@dataclass(frozen=True)
class Live:
    """The request goes out as it is: the session does not answer it (not a call it replays, a
    lenient run gone live, a host allowed live)."""


LIVE = Live()
Decision = Replayed | Diverged | Live


def _recorded_traces() -> list[str]:
    """The traces this process recorded its calls in, when it records them (the exporter's
    recorder loaded): nothing is imported to ask."""
    recording = sys.modules.get("rewind.exporter.capture.recording")
    return list(recording.traces) if recording is not None else []


@dataclass
class ReplaySession:
    cassette: Cassette
    mode: ReplayMode = STRICT
    speed: float | None = None  # None: no delays; 1.0: recorded timing; 2.0: twice as fast
    report_path: str | None = None
    allow_live: tuple[str, ...] = ()  # hosts (globs) whose unrecorded HTTP calls may go out
    ignore: tuple[str, ...] = ()  # request paths (globs) whose values may differ (volatile.py)
    clock: Clock = CLOCK_RECORDED  # live: the run's epoch values are near now (volatile.py)
    matcher: Matcher = field(init=False)
    divergence: Divergence | None = None
    live_requests: int = 0
    tools: list[str] = field(default_factory=list)  # tools the run called, in order
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _order: Order | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.mode = replay_mode(self.mode)  # a string from JSON or a marker too
        self.clock = clock(self.clock)
        live_s = time.time() if self.clock == CLOCK_LIVE else 0.0
        self.matcher = Matcher(self.cassette.interactions,
                               Tolerance(tuple(self.ignore), self.cassette.started_ns / 1e9,
                                         live_s))

    @property
    def live(self) -> bool:
        """True once a lenient run has diverged: everything from then on goes live."""
        return self.mode == LENIENT and self.divergence is not None

    def _diverged(self, found: Divergence) -> Diverged:
        with self._lock:
            if self.divergence is None:
                self.divergence = found
            if self.mode == LENIENT:
                self.live_requests += 1
        self._ordering().open()
        self.write_report()
        return Diverged(found)

    def _matched(self, asked: Asked, cheap: bool = False) -> Replayed | Diverged | None:
        found = self.matcher.match(asked, cheap)
        if found is None:
            return None
        return Replayed(found) if isinstance(found, Interaction) else self._diverged(found)

    def decide(self, method: str, url: str, headers: Mapping[str, str], body: bytes,
               cheap: bool = False) -> Decision | None:
        """What answers an HTTP request: a recorded interaction, a divergence, or the network
        (a call that is not to a model and not recorded either, or the run has gone live).
        ``cheap``: None unless that is found without comparing the request with the recorded
        ones (its exact key, or the run is live); nothing is taken or counted then."""
        parts = urlsplit(url)
        if providers.detect(parts.hostname or "", parts.path) is None:
            return self._decide_http(method, parts, headers, body, cheap)
        if self.live:
            return self._went_live()
        canon = canonical.canonical_request(method, url, headers, body)
        semantic = None
        if self.matcher.has_semantic:  # a recording with calls rebuilt from their content
            from rewind.replay.cassette.semantic import request_semantic_form

            semantic = request_semantic_form(parts.hostname or "", parts.path, body)
        return self._matched(Asked(canon, semantic=semantic), cheap)

    def _went_live(self) -> Live:
        """A request sent to the network (lenient after a divergence, or let through)."""
        with self._lock:
            self.live_requests += 1
        return LIVE

    def _decide_http(self, method: str, parts: SplitResult, headers: Mapping[str, str],
                     body: bytes, cheap: bool = False) -> Decision | None:
        """Another HTTP call of the run: answered from the recording; one it does not hold is
        refused in strict mode (a replay never reaches production) unless its host is allowed
        live. Telemetry (OTLP, the worker) never gets here: the transport lets it pass."""
        if self.live:
            return self._went_live()
        found = self.matcher.match(
            Asked(canonical.canonical_http(method, parts.geturl(), headers, body), A.KIND_HTTP),
            cheap)
        if found is None:
            return None
        if isinstance(found, Interaction):
            return Replayed(found)
        host = (parts.hostname or "").lower()
        if host_matches(host, self.allow_live):
            return self._went_live()
        where = f"{host}:{parts.port}" if parts.port else host
        return self._diverged(dataclasses.replace(
            found, reason=f"{method.upper()} {where}{parts.path} is not in the recording "
                          f"({found.reason}); a strict replay never sends it: pass "
                          f"--allow-live {host} to let it through"))

    def decide_tool(self, name: str, arguments: Any) -> Decision:
        """The recorded result of a tool call, a divergence, or the tool runs live."""
        with self._lock:
            self.tools.append(name)
        if self.live:
            return LIVE
        args = canonical.parse_body(arguments) if isinstance(arguments, (str, bytes)) else arguments
        return self._matched(Asked({"tool": name, "arguments": args}, A.KIND_TOOL,
                                   canonical.tool_key(name, args)))

    def decide_db(self, form: dict[str, Any], key: str) -> Decision:
        """The recorded outcome of a database call, or a divergence: one the recording does not
        hold never reaches a database in a strict replay (lenient: it goes live)."""
        if self.live:
            return self._went_live()
        return self._matched(Asked(form, A.KIND_DB, key))

    def decide_rpc(self, method: str, target: str, form: dict[str, Any], key: str) -> Decision:
        """The recorded outcome of a gRPC call, or a divergence naming the method: one the
        recording does not hold is never sent in a strict replay (lenient, or a host allowed
        live: it goes out)."""
        if self.live:
            return self._went_live()
        found = self.matcher.match(Asked(form, A.KIND_RPC, key))
        if isinstance(found, Interaction):
            return Replayed(found)
        from rewind.exporter.rpc.rpc_calls import split_target

        host = split_target(target)[0].lower()
        if host and host_matches(host, self.allow_live):
            return self._went_live()
        return self._diverged(dataclasses.replace(
            found, reason=f"gRPC call {method} to {target or 'its channel'} is not in the "
                          f"recording ({found.reason}); a strict replay never sends it"))

    # -- timing -----------------------------------------------------------------------------
    def _ordering(self) -> Order:
        """Worked out at the first answer, once."""
        from rewind.replay.play.recorded.ordering import Order

        with self._lock:
            if self._order is None:
                self._order = Order(waits_for(self.cassette.interactions))
            return self._order

    def hold(self, found: Interaction) -> Hold | None:
        """How long the answer from ``found`` is held back, or None when it goes at once (and
        counts as released): a call that was in flight with none that finished before it, at
        no ``--speed``, is never delayed. A stream's latency is in its events' offsets."""
        from rewind.replay.play.recorded.ordering import Hold

        order = self._ordering()
        recorded = (found.end_offset_ns - found.start_offset_ns) / 1e9
        latency = recorded / self.speed if self.speed and not found.streamed else 0.0
        if latency <= 0 and not order.blocked(found.span_id):
            order.release(found.span_id)
            return None
        return Hold(order, found.span_id, max(latency, 0.0))

    # -- reporting --------------------------------------------------------------------------
    def report(self) -> ReplayReport:
        return ReplayReport(trace_id=self.cassette.trace_id, mode=self.mode,
                            recorded=self.matcher.total, requests=self.matcher.requests,
                            replayed=self.matcher.replayed, live=self.live_requests,
                            divergence=self.divergence, trace_ids=tuple(_recorded_traces()),
                            tools=tuple(self.tools), match_keys=self.cassette.match_keys)

    def summary(self) -> dict[str, Any]:
        """The report as JSON data (the HTTP API's session status)."""
        return self.report().to_dict()

    def write_report(self) -> None:
        if self.report_path:
            Path(self.report_path).write_text(self.report().to_json())
