"""A recorded run as a walkable timeline: the Python API behind ``rewind inspect``.

    from rewind.replay.timetravel.timeline import Timeline

    run = Timeline.load("4bf92f3577b34da6a3ce929d0e0e4736")   # the store, or a running worker
    run = Timeline.from_file("incident.rw")
    for event in run.of_type("tool"):
        print(event.step, event.name, event.preview)
    run.messages_at(3)             # the conversation as it stood after step 3
    run.user_messages()            # [(step, text), ...]
    fix = run.fork(3, edit_user_message="Only look the order up.")
    outcome = fix.continue_from(my_agent)    # see fork.py

Every span of the trace is an :class:`Event` (``events.py``: ``llm``, ``tool``, ``agent``,
``workflow``, ``context`` or ``span``); those with a recorded exchange carry their
``rewind.step`` and :class:`Interaction`. An LLM span describing a call another span stands for
(an SDK's own span, a second instrumentation's: ``cassette/calls.py``) is ``context``: shown,
never counted as a call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import json_or_text
from rewind.exporter.core.errors import RewindError
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.calls import has_exchange
from rewind.replay.cassette.messages import Message
from rewind.replay.cassette.model import Cassette
from rewind.replay.timetravel.events import Event, as_int, event_type
from rewind.replay.timetravel.stats import PriceTable, load_prices

if TYPE_CHECKING:
    from rewind.collector.store.store import Store
    from rewind.replay.sources.trace_sources import TraceSource
    from rewind.replay.timetravel.bisect import Bisection
    from rewind.replay.timetravel.diff import TraceDiff
    from rewind.replay.timetravel.fork import Checkpoint


class TimelineError(RewindError, LookupError):
    """A step or event that the trace does not have; the message says which trace."""

    http_status = 404


class Timeline:
    """One trace: its events in order, its cassette, and the ways to look into it."""

    def __init__(self, trace_id: str, spans: Sequence[Mapping[str, Any]],
                 prices: PriceTable | None = None) -> None:
        if not spans:
            raise TimelineError(f"trace {trace_id} has no spans", trace_id=trace_id)
        self.trace_id = trace_id
        self.spans = list(spans)
        self.cassette: Cassette = build_cassette(trace_id, self.spans)
        self._prices = prices
        by_span = {i.span_id: i for i in self.cassette.interactions}
        ordered = sorted(self.spans, key=lambda s: (as_int(s.get("StartNs")), str(s["SpanId"])))
        self.events: list[Event] = []
        for span in ordered:
            interaction = by_span.get(span["SpanId"])
            step = interaction.step if interaction is not None else (
                as_int(span["SpanAttributes"][A.STEP]) if has_exchange(span) else None)
            shadow_of = self.cassette.shadows.get(span["SpanId"])
            kind = "context" if shadow_of else event_type(span)
            self.events.append(Event(len(self.events), kind, span["SpanName"], step, span,
                                     interaction, shadow_of))
        self._by_step = {e.step: e for e in self.events if e.step is not None}

    # -- loading --------------------------------------------------------------------------
    @classmethod
    def from_store(cls, store: Store, trace_id: str) -> Timeline:
        from rewind.replay.sources.trace_sources import StoreSource

        return cls(trace_id.strip().lower(), StoreSource(store).spans(trace_id))

    @classmethod
    def from_url(cls, url: str, trace_id: str) -> Timeline:
        """From a running worker (``rewind serve`` / ``rewind worker``)."""
        from rewind.replay.sources.trace_sources import ApiSource

        return cls(trace_id.strip().lower(), ApiSource(url).spans(trace_id))

    @classmethod
    def from_file(cls, path: str | Path) -> Timeline:
        """From a ``.rw`` trace file (``rewind export``). Read, not stored: not screened for
        credentials (what stores or sends a trace screens it: import, export, share)."""
        from rewind.replay.sources.archive import read_archive

        archive = read_archive(path, for_import=False)
        return cls(archive.trace_id, archive.spans)

    @classmethod
    def from_source(cls, source: TraceSource, trace_id: str) -> Timeline:
        return cls(trace_id.strip().lower(), source.spans(trace_id))

    @classmethod
    def load(cls, ref: str, api: str | None = None, clickhouse: str | None = None) -> Timeline:
        """A ``.rw`` file path, or a trace id read from a worker if one answers, else the
        store."""
        return load_all([ref], api, clickhouse)[0]

    def __repr__(self) -> str:
        """What a REPL shows: the whole id, its size, and what it was made from."""
        made = self.lineage
        origin = f", {made['kind']} of {made['source_trace_id']}" if made else ""
        return (f"<Timeline {self.trace_id}: {len(self._by_step)} steps, "
                f"{len(self.events)} events{origin}>")

    # -- walking --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __getitem__(self, index: int) -> Event:
        return self.events[index]

    @property
    def steps(self) -> list[Event]:
        """Events with a recorded exchange, in step order."""
        return [self._by_step[s] for s in sorted(self._by_step)]

    def step(self, number: int) -> Event:
        try:
            return self._by_step[number]
        except KeyError:
            known = sorted(self._by_step)
            span = f"0..{known[-1]}" if known else "none"
            raise TimelineError(f"trace {self.trace_id} has no step {number} "
                                f"(recorded steps: {span})", trace_id=self.trace_id,
                                step=number) from None

    def of_type(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.type == kind]

    def indices_of_type(self, kind: str) -> list[int]:
        return [e.index for e in self.events if e.type == kind]

    def find(self, kind: str | None = None, name: str | None = None,
             tool: str | None = None) -> list[Event]:
        """Events by type, by span name (substring) or by tool name."""
        return [e for e in self.events
                if (kind is None or e.type == kind)
                and (name is None or name in e.name)
                and (tool is None or (e.type == "tool" and e.tool_name == tool))]

    # -- conversation ---------------------------------------------------------------------
    def messages_at(self, step: int) -> list[Message]:
        """The conversation once ``step`` is done: the input of the last model call at or
        before it, that call's answer, then the results of tool steps up to ``step``."""
        self.step(step)
        calls = [e for e in self.steps if e.type == "llm" and e.step is not None
                 and e.step <= step]
        if not calls:
            messages: list[Message] = []
            start = -1
        else:
            last = calls[-1]
            messages = [*last.input_messages(), *last.output_messages()]
            start = last.step if last.step is not None else -1
        for event in self.steps:
            if event.type == "tool" and event.step is not None and start < event.step <= step:
                messages += event.output_messages()
        return messages

    def user_messages(self) -> list[tuple[int, str]]:
        """Every user message with the step whose request first carried it."""
        seen: set[tuple[int, str]] = set()
        found: list[tuple[int, str]] = []
        for event in self.steps:
            if event.type != "llm" or event.step is None:
                continue
            position = 0
            for message in event.input_messages():
                if message.get("role") != "user":
                    continue
                text = "".join(p.get("content", "") for p in message.get("parts", [])
                               if p.get("type") == "text")
                if text and (position, text) not in seen:
                    seen.add((position, text))
                    found.append((event.step, text))
                position += 1
        return found

    # -- totals, lineage ------------------------------------------------------------------
    @property
    def prices(self) -> PriceTable:
        """What costs are computed with (the built-in table unless set)."""
        if self._prices is None:
            self._prices = load_prices()
        return self._prices

    @prices.setter
    def prices(self, table: PriceTable) -> None:
        self._prices = table

    def cost_of(self, event: Event) -> float | None:
        if event.type != "llm":
            return None
        return self.prices.call_cost(event.model, event.attributes)

    def totals(self) -> dict[str, Any]:
        llm = self.of_type("llm")
        costs = [self.cost_of(e) for e in llm]
        start = min(e.start_ns for e in self.events)
        end = max(e.start_ns + e.duration_ns for e in self.events)
        return {"events": len(self.events), "steps": len(self._by_step), "llm_calls": len(llm),
                "tool_calls": len(self.of_type("tool")),
                "input_tokens": sum(e.input_tokens for e in llm),
                "output_tokens": sum(e.output_tokens for e in llm),
                "cost_usd": sum(c for c in costs if c is not None),
                "unpriced_calls": sum(c is None for c in costs),
                "unreported_calls": sum(not e.usage_reported for e in llm),
                "duration_ms": (end - start) / 1e6,
                "errors": sum(not e.ok for e in self.events)}

    @property
    def lineage(self) -> dict[str, Any] | None:
        """What this run was made from, when Rewind made it: a fork (``rewind.fork.*`` on a
        span: source, step, edits) or a replay (``rewind.replay.source_trace_id`` on its
        calls); ``kind`` says which."""
        for event in self.events:
            source = event.attributes.get(A.FORK_SOURCE_TRACE_ID)
            if source:
                return {"kind": "fork", "source_trace_id": source,
                        "step": as_int(event.attributes.get(A.FORK_STEP)),
                        "edits": json_or_text(event.attributes.get(A.FORK_EDITS) or "{}")}
        replayed = next((e.attributes[A.REPLAY_SOURCE_TRACE_ID] for e in self.events
                         if e.attributes.get(A.REPLAY_SOURCE_TRACE_ID)), None)
        if replayed:
            return {"kind": "replay", "source_trace_id": replayed, "step": None, "edits": None}
        return None

    # -- time travel ----------------------------------------------------------------------
    def fork(self, at_step: int, **edits: Any) -> Checkpoint:
        """An independent checkpoint at ``at_step`` (see
        :func:`rewind.replay.timetravel.fork.fork`); its ``messages`` are the conversation as it
        stood before that step."""
        from rewind.replay.timetravel.fork import fork

        before = self.messages_at(at_step - 1) if at_step > 0 and at_step - 1 in self._by_step \
            else []
        return fork(self.cassette, at_step, messages=before, **edits)

    def diff(self, other: Timeline) -> TraceDiff:
        from rewind.replay.timetravel.diff import diff_runs

        return diff_runs(self.cassette, other.cassette)

    def bisect(self, bad: Timeline) -> Bisection:
        """This run as the good one, ``bad`` as the one that went wrong."""
        from rewind.replay.timetravel.bisect import bisect

        return bisect(self.cassette, bad.cassette)


def is_file_ref(ref: str) -> bool:
    return ref.endswith(".rw") or Path(ref).is_file()


def load_all(refs: Sequence[str], api: str | None = None,
             clickhouse: str | None = None) -> list[Timeline]:
    """Each ref a ``.rw`` path, a trace id or a unique prefix of one (as the CLI takes them);
    trace ids are read through one source (a worker if one answers, else the store)."""
    source = None
    loaded = []
    for ref in refs:
        if is_file_ref(ref):
            loaded.append(Timeline.from_file(ref))
            continue
        if source is None:
            from rewind.replay.sources.locate import open_source, resolve_trace_id

            source = open_source(api, clickhouse)
        loaded.append(Timeline.from_source(source, resolve_trace_id(source, ref)))
    return loaded
