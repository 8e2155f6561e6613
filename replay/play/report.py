"""What a replay did: written by the replayed process at exit, read by the runner, printed by the
CLI and the pytest plugin, served by the worker. Its fields are named here alone.

A report is a value: frozen, typed, built from JSON by :meth:`ReplayReport.from_dict` alone; a
step that learns more (the runner adds the guard's connections and the isolation) makes a new
one with ``dataclasses.replace``. Its JSON is what users read (``--json``, report files, MCP,
the web UI): :meth:`ReplayReport.to_dict` keeps its shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rewind.replay.cassette.model import KeyVersions
from rewind.replay.play.divergence import Divergence
from rewind.replay.play.replay_settings import ReplayMode, replay_mode


@dataclass(frozen=True, kw_only=True)
class Connection:
    """A connection no hook answered, as the guard met it in a replayed process (``guard.py``)
    or the seal outside Python (``sealed/watch.py``): refused, or let out (lenient)."""

    kind: str  # tcp, udp, dns, unix ...
    host: str
    port: int | None
    refused: bool
    stack: tuple[str, ...] = ()  # innermost frame last; none when the seal met it
    pid: int | None = None
    process: str | None = None  # the seal's: the process that made it, when it could tell
    by: str = ""  # "seal": refused by the seal, outside Python

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}" if self.port is not None else self.host

    def to_dict(self) -> dict[str, Any]:
        """As the guard and the seal write it (the seal's two fields only when it met it)."""
        found = {"kind": self.kind, "host": self.host, "port": self.port,
                 "stack": list(self.stack), "refused": self.refused, "pid": self.pid}
        return {**found, "process": self.process, "by": self.by} if self.by else found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Connection:
        port, pid = data.get("port"), data.get("pid")
        return cls(kind=str(data.get("kind") or ""), host=str(data["host"]),
                   port=int(port) if port is not None else None,
                   refused=bool(data.get("refused")),
                   stack=tuple(str(f) for f in data.get("stack") or ()),
                   pid=int(pid) if pid is not None else None,
                   process=str(data["process"]) if data.get("process") is not None else None,
                   by=str(data.get("by") or ""))


@dataclass(frozen=True, kw_only=True)
class ReplayReport:
    trace_id: str  # the recording replayed
    mode: ReplayMode
    recorded: int  # interactions the recording holds
    requests: int = 0  # requests the run made that a recording could answer
    replayed: int = 0  # answered from the recording
    live: int = 0  # went live (lenient mode, after the divergence)
    divergence: Divergence | None = None  # the first request the recording does not answer
    # Where the replayed run's own calls were recorded, when the program records them (it
    # instruments itself): the new trace, to diff against the one replayed.
    trace_ids: tuple[str, ...] = ()
    # Connections no hook answered, met by the guard (guard.py): refused, or let out (lenient).
    connections: tuple[Connection, ...] = ()
    tools: tuple[str, ...] = ()  # the tools the run called (@tool hooks)
    # How the command was kept off the network, set by the runner: "sealed", or "guarded"
    # with the reason it was not sealed (see replay/play/sealed).
    isolation: str = ""
    # Recorded match keys of another version than this host's, made again from the recorded
    # requests (cassette/build.py); None: the stored keys were used as they are.
    match_keys: KeyVersions | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", replay_mode(self.mode))  # a choice, never loose text

    def headline(self) -> str:
        line = (f"replayed {self.replayed}/{self.recorded} recorded steps of trace "
                f"{self.trace_id} ({', '.join(filter(None, (self.mode, self.isolation)))}), ")
        refused = [c.where for c in self.connections if c.refused]
        if not refused:
            return line + f"{self.live} live calls"
        shown = ", ".join(dict.fromkeys(refused[:3]))
        went = f"{self.live} live calls" if self.live else "no live call"
        return line + (f"{went}; {len(refused)} connections refused before they left "
                       f"({shown})")

    def notices(self) -> list[str]:
        """What the user should know besides the headline, a line each (the CLI prints them):
        recorded match keys recomputed because they were made by other rules."""
        return [self.match_keys.describe(self.trace_id)] if self.match_keys else []

    def to_dict(self) -> dict[str, Any]:
        found = {"trace_id": self.trace_id, "mode": self.mode.value, "recorded": self.recorded,
                 "requests": self.requests, "replayed": self.replayed, "live": self.live,
                 "divergence": self.divergence.to_dict() if self.divergence else None,
                 "trace_ids": list(self.trace_ids),
                 "connections": [c.to_dict() for c in self.connections],
                 "tools": list(self.tools), "isolation": self.isolation}
        if self.match_keys:  # only then: a report of today's keys reads as it always did
            found["match_keys"] = self.match_keys.to_dict()
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplayReport:
        """The one way back from JSON (a report file, the worker's answer)."""
        found, keys = data.get("divergence"), data.get("match_keys")
        return cls(trace_id=str(data["trace_id"]), mode=replay_mode(str(data["mode"])),
                   recorded=int(data["recorded"]), requests=int(data.get("requests", 0)),
                   replayed=int(data.get("replayed", 0)), live=int(data.get("live", 0)),
                   divergence=Divergence.from_dict(found) if found else None,
                   trace_ids=tuple(str(t) for t in data.get("trace_ids") or ()),
                   connections=tuple(Connection.from_dict(c)
                                     for c in data.get("connections") or ()),
                   tools=tuple(str(t) for t in data.get("tools") or ()),
                   isolation=str(data.get("isolation") or ""),
                   match_keys=KeyVersions.from_dict(keys) if keys else None)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    @classmethod
    def from_json(cls, text: str) -> ReplayReport:
        return cls.from_dict(json.loads(text))
