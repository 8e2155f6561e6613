"""Today's run of each replayed script, recorded as ``rewind record`` records one: the program
exports its own spans (its calls, answered from the recording or gone live) to a collector, so
the suite's results name the replayed trace (the web UI links the recording to it: the diff) and
a run that went live has its usage (tokens, cost) read back once its spans are written. With a
store at hand the collector is started here on loopback, writing into it, and the usage read
from the store after a flush; with a worker holding the store, the worker's own collector takes
the spans and the usage is asked of the worker (``GET /v1/usage/traces``) until they are in."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from rewind.collector.store.read.reader_usage import TraceUsage, usage_by_trace
from rewind.collector.store.server_settings import IngestOptions
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import RewindError
from rewind.exporter.core.process_settings import replaying_from
from rewind.replay.cassette.model import Cassette
from rewind.replay.play.launch import Settings
from rewind.replay.play.recorder import RecordOutcome, read_report, record_settings
from rewind.replay.sources.trace_sources import SourceError, StoreSource

if TYPE_CHECKING:
    from rewind.collector import IngestHandle

FLUSH_TIMEOUT_S = 30.0
WORKER_WAIT_S = 15.0  # the worker's collector writes a batch within its batch timeout


@dataclass(frozen=True)
class Usage:
    """Tokens and cost of a run; None where some call did not report or price its usage."""

    tokens: int | None
    cost: float | None


class TodaysRuns:
    """Where replayed scripts send their spans, and what is read back from there."""

    def __init__(self, store: Store | None = None, endpoint: str | None = None,
                 worker: Any = None) -> None:
        """``store``: a collector is started here writing into it; else ``endpoint`` (the
        OTLP receiver of ``worker``, an ``ApiSource``) takes the spans, and the usage is read
        through ``worker``."""
        self._worker = worker
        self._llm_calls: dict[str, int] = {}  # per trace, what its program's report said
        self._tmp = tempfile.TemporaryDirectory(prefix="rewind-suite-")
        self._ingest: IngestHandle | None = None
        self._scratch = ""  # the temporary store's folder (``scratch``)
        self.store = store
        if store is not None:
            from rewind.collector import start_ingest

            self._ingest = start_ingest(store, IngestOptions(
                grpc_port=0, http_port=0, spool_dir=Path(self._tmp.name, "spool"),
                migrate=False))
            endpoint = f"http://{self._ingest.grpc_endpoint}"
        self.endpoint = endpoint or ""

    def report_path(self, trace_id: str) -> str:
        return os.path.join(self._tmp.name, f"{trace_id}-{os.urandom(4).hex()}.jsonl")

    def settings(self, report_path: str, name: str) -> Settings:
        return record_settings(os.environ, report_path, self.endpoint, name, None)

    @contextlib.contextmanager
    def in_process(self, source_trace: str, name: str) -> Iterator[list[str]]:
        """Records what this process does in the block (a request or job of ``source_trace``
        replayed here, ``rewind suite run --app/--call``) as a replayed program records itself:
        to :attr:`endpoint`, under service ``name``, marked as made from ``source_trace``.
        Yields the list the recorded traces are put in once they are sent (on leaving)."""
        from rewind import exporter
        from rewind.exporter.otlp.otel_pipeline import build_provider
        from rewind.exporter.setup.autorecord import TraceIds

        provider = build_provider(name, self.endpoint)
        seen = TraceIds()
        provider.add_span_processor(seen)
        with replaying_from(source_trace):  # what instrument() marks the spans with
            exporter.instrument(tracer_provider=provider)
        traces: list[str] = []
        try:
            yield traces
        finally:
            exporter.uninstrument()
            provider.force_flush(FLUSH_TIMEOUT_S * 1000)
            provider.shutdown()
            traces += list(seen.ids)

    def traces(self, report_path: str) -> list[str]:
        """The traces the replayed program recorded (its root trace first); how many LLM
        calls it made is noted for :meth:`usage`."""
        outcome = RecordOutcome(0, "", read_report(report_path))
        for trace_id in outcome.trace_ids:
            self._llm_calls[trace_id] = outcome.calls().get(A.KIND_LLM, 0)
        return outcome.trace_ids

    def usage(self, trace_ids: list[str]) -> Usage | None:
        """What today's run used, its spans written first; None when none is found. A run
        whose program said it made no LLM call used nothing (no waiting for its calls)."""
        if not trace_ids:
            return None
        made = [self._llm_calls[t] for t in trace_ids if t in self._llm_calls]
        if made and not any(made):
            return Usage(0, 0.0)
        if self._ingest is not None and self.store is not None:
            self._ingest.flush(FLUSH_TIMEOUT_S)
            found: Mapping[str, TraceUsage] = usage_by_trace(self.store, trace_ids, None)
        elif self._worker is not None:
            found = self._worker_usage(trace_ids)
        else:
            return None
        if not found:
            return None
        tokens = sum(u.input_tokens + u.output_tokens for u in found.values())
        unreported = any(u.unreported for u in found.values())
        unpriced = any(u.unpriced for u in found.values())
        return Usage(None if unreported else tokens,
                     None if unreported or unpriced else sum(u.cost_usd for u in found.values()))

    def cassette(self, trace_ids: list[str]) -> Cassette | None:
        """Today's run as its own trace (the first) holds it, its spans written first (the
        worker's: asked until it has them); None when the program recorded none."""
        if not trace_ids:
            return None
        if self._ingest is not None and self.store is not None:
            self._ingest.flush(FLUSH_TIMEOUT_S)
            source: Any = StoreSource(self.store)
        elif self._worker is not None:
            source = self._worker
        else:
            return None
        deadline = time.monotonic() + (WORKER_WAIT_S if self._ingest is None else 0)
        while True:
            try:
                return source.cassette(trace_ids[0])
            except RewindError:
                if time.monotonic() > deadline:
                    return None
            time.sleep(0.25)

    def _worker_usage(self, trace_ids: list[str]) -> dict[str, TraceUsage]:
        """The worker's answer once the run's own trace (the first) is in its store, or what
        it has after ``WORKER_WAIT_S``."""
        path = "/v1/usage/traces?" + urlencode([("trace_id", t) for t in trace_ids])
        deadline = time.monotonic() + WORKER_WAIT_S
        while True:
            try:  # a trace not written yet is unknown to the worker (404)
                answer = self._worker.call("GET", path)["traces"]
            except SourceError:
                answer = {}
            if trace_ids[0] in answer or time.monotonic() > deadline:
                return {t: TraceUsage.from_columns(row) for t, row in answer.items()}
            time.sleep(0.25)

    @classmethod
    def scratch(cls) -> TodaysRuns:
        """With no store and no worker (an exported folder): a store of its own in a temporary
        folder, so that a live run's own trace is read back to judge it; gone on close."""
        from rewind.collector.store.migrate import migrate

        folder = tempfile.mkdtemp(prefix="rewind-suite-store-")
        store = Store(f"chdb://{folder}")
        migrate(store)
        found = cls(store)
        found._scratch = folder
        return found

    def close(self) -> None:
        if self._ingest is not None:
            self._ingest.stop()
        self._tmp.cleanup()
        if self._scratch and self.store is not None:
            self.store.close()
            shutil.rmtree(self._scratch, ignore_errors=True)
