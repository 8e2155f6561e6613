"""What a replay did: written by the replayed process at exit, read by the runner, printed by the
CLI and the pytest plugin, served by the worker. Its fields are named here alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rewind.replay.play.divergence import Divergence, FieldDiff


@dataclass
class ReplayReport:
    trace_id: str  # the recording replayed
    mode: str  # strict or lenient
    recorded: int  # interactions the recording holds
    requests: int = 0  # requests the run made that a recording could answer
    replayed: int = 0  # answered from the recording
    live: int = 0  # went live (lenient mode, after the divergence)
    divergence: Divergence | None = None  # the first request the recording does not answer
    # Where the replayed run's own calls were recorded, when the program records them (it
    # instruments itself): the new trace, to diff against the one replayed.
    trace_ids: list[str] = field(default_factory=list)
    # Connections no hook answered, met by the guard (guard.py): refused, or let out (lenient).
    connections: list[dict[str, Any]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)  # the tools the run called (@tool hooks)
    # How the command was kept off the network, set by the runner: "sealed", or "guarded"
    # with the reason it was not sealed (see replay/play/sealed).
    isolation: str = ""

    def headline(self) -> str:
        line = (f"replayed {self.replayed}/{self.recorded} recorded steps of trace "
                f"{self.trace_id} ({', '.join(filter(None, (self.mode, self.isolation)))}), ")
        refused = [f"{c['host']}:{c['port']}" if c.get("port") is not None else str(c["host"])
                   for c in self.connections if c.get("refused")]
        if not refused:
            return line + f"{self.live} live calls"
        shown = ", ".join(dict.fromkeys(refused[:3]))
        went = f"{self.live} live calls" if self.live else "no live call"
        return line + (f"{went}; {len(refused)} connections refused before they left "
                       f"({shown})")

    def to_dict(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "mode": self.mode, "recorded": self.recorded,
                "requests": self.requests, "replayed": self.replayed, "live": self.live,
                "divergence": self.divergence.to_dict() if self.divergence else None,
                "trace_ids": list(self.trace_ids), "connections": list(self.connections),
                "tools": list(self.tools), "isolation": self.isolation}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplayReport:
        found = data.get("divergence")
        divergence = None
        if found:
            diffs = [FieldDiff(d["path"], d.get("expected"), d.get("actual"))
                     for d in found.get("diffs") or []]
            divergence = Divergence(int(found["step"]), str(found["reason"]),
                                    found.get("expected_step"), found.get("expected_name", ""),
                                    diffs, int(found.get("tolerated") or 0))
        return cls(str(data["trace_id"]), str(data["mode"]), int(data["recorded"]),
                   int(data.get("requests", 0)), int(data.get("replayed", 0)),
                   int(data.get("live", 0)), divergence,
                   [str(t) for t in data.get("trace_ids") or []],
                   list(data.get("connections") or []),
                   [str(t) for t in data.get("tools") or []], str(data.get("isolation") or ""))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    @classmethod
    def from_json(cls, text: str) -> ReplayReport:
        return cls.from_dict(json.loads(text))
