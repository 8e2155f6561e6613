"""What a fork is made of: the checkpoint's data (``fork.py`` makes checkpoints and runs them,
``resume.py`` runs one), what resuming one did (:class:`ForkRun`), and its error."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Link, SpanContext, TraceFlags

from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import RewindError
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.timetravel.edits import Edits, UserSlot


class ForkError(RewindError):
    """A fork that cannot be made or resumed; the message names the trace and step."""


@dataclass
class ForkRun:
    """What resuming a checkpoint did."""

    trace_id: str | None  # the new run's trace
    source_trace_id: str
    step: int
    edits: dict[str, Any]
    replayed: int  # calls answered from the recording
    live: int  # calls that went live (model and tools)
    edited: int = 0  # calls the edits changed
    result: Any = None  # what the callable returned
    exit_code: int | None = None  # for a command
    divergence: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "result"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ForkRun:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@dataclass
class CheckpointData:
    """A checkpoint's data: what to replay, what to edit, where (``fork.Checkpoint`` adds running
    it)."""

    source_trace_id: str
    step: int
    edits: Edits
    cassette: Cassette  # the source's steps up to and including the fork point (a copy)
    slot: UserSlot | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)  # conversation before N

    @property
    def at(self) -> Interaction:
        return next(i for i in self.cassette.interactions if i.step == self.step)

    @property
    def lineage(self) -> dict[str, Any]:
        return {A.FORK_SOURCE_TRACE_ID: self.source_trace_id, A.FORK_STEP: self.step,
                A.FORK_EDITS: json.dumps(self.edits.to_dict(), ensure_ascii=False,
                                         sort_keys=True, default=str)}

    def link(self) -> Link:
        """To the source trace's span of step N."""
        context = SpanContext(int(self.source_trace_id, 16), int(self.at.span_id, 16),
                              is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return Link(context, {A.LINK_KIND: "fork source"})

    def to_dict(self) -> dict[str, Any]:
        return {"source_trace_id": self.source_trace_id, "step": self.step,
                "edits": self.edits.to_dict(), "cassette": self.cassette.to_dict(),
                "slot": self.slot.to_dict() if self.slot else None, "messages": self.messages}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckpointData:
        slot = data.get("slot")
        return cls(data["source_trace_id"], int(data["step"]), Edits.from_dict(data["edits"]),
                   Cassette.from_dict(data["cassette"]), UserSlot(**slot) if slot else None,
                   list(data.get("messages") or []))
