"""Today's run of each replayed script, recorded as ``rewind record`` records one: the program
exports its own spans (its calls, answered from the recording or gone live) to a collector, so
the suite's results name the replayed trace (the web UI links the recording to it: the diff) and
a run that went live has its usage (tokens, cost) read back from the store once its spans are
written. With a store at hand the collector is started here on loopback, writing into it; with
a worker holding the store, the worker's own collector takes the spans."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rewind.collector.reader_usage import usage_by_trace
from rewind.collector.server_settings import IngestOptions
from rewind.collector.service import IngestHandle, start_ingest
from rewind.collector.store import Store
from rewind.replay.play.launch import Settings
from rewind.replay.play.recorder import RecordOutcome, read_report, record_settings

FLUSH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Usage:
    """Tokens and cost of a run; None where some call did not report or price its usage."""

    tokens: int | None
    cost: float | None


class TodaysRuns:
    """Where replayed scripts send their spans, and what is read back from there."""

    def __init__(self, store: Store | None = None, endpoint: str | None = None) -> None:
        """``store``: a collector is started here writing into it; else ``endpoint`` (the
        worker's OTLP receiver) takes the spans (their usage is not read back then)."""
        self._tmp = tempfile.TemporaryDirectory(prefix="rewind-suite-")
        self._ingest: IngestHandle | None = None
        self.store = store
        if store is not None:
            self._ingest = start_ingest(store, IngestOptions(
                grpc_port=0, http_port=0, spool_dir=Path(self._tmp.name, "spool"),
                migrate=False))
            endpoint = f"http://{self._ingest.grpc_endpoint}"
        self.endpoint = endpoint or ""

    def report_path(self, trace_id: str) -> str:
        return os.path.join(self._tmp.name, f"{trace_id}-{os.urandom(4).hex()}.jsonl")

    def settings(self, report_path: str, name: str) -> Settings:
        return record_settings(os.environ, report_path, self.endpoint, name, None)

    @staticmethod
    def traces(report_path: str) -> list[str]:
        """The traces the replayed program recorded (its root trace first)."""
        return RecordOutcome(0, "", read_report(report_path)).trace_ids

    def usage(self, trace_ids: list[str]) -> Usage | None:
        """What today's run used, its spans written first; None when none is found."""
        if not trace_ids or self._ingest is None or self.store is None:
            return None
        self._ingest.flush(FLUSH_TIMEOUT_S)
        found = usage_by_trace(self.store, trace_ids, None)
        if not found:
            return None
        tokens = sum(u.input_tokens + u.output_tokens for u in found.values())
        unreported = any(u.unreported for u in found.values())
        unpriced = any(u.unpriced for u in found.values())
        return Usage(None if unreported else tokens,
                     None if unreported or unpriced else sum(u.cost_usd for u in found.values()))

    def close(self) -> None:
        if self._ingest is not None:
            self._ingest.stop()
        self._tmp.cleanup()
