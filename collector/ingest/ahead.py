"""Sealed spool segments -> Native blocks, converted ahead of their insert.

The writer inserts one segment at a time; converting the next ones meanwhile (in the
converter's worker processes) keeps the store busy. At most ``ahead_bytes`` of segments are
converted ahead (but always one). A segment's conversion stays registered until it is written,
so it is never started twice; a worker that dies loses every conversion in flight, and the
segment being written is then converted in the writer thread, once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

from rewind.collector.ingest.convert import Block, ConversionError, Converter
from rewind.collector.ingest.wal.spool import Segment, Spool
from rewind.collector.wire.metrics import Metrics

log = logging.getLogger("rewind.collector.ingest.pipeline")  # a part of the pipeline, logged as it

SetAside = Callable[[Segment, Exception, str], None]


class ConversionsAhead:
    def __init__(self, converter: Converter, spool: Spool, metrics: Metrics, ahead_bytes: int,
                 set_aside: SetAside) -> None:
        self.converter = converter
        self.spool = spool
        self.metrics = metrics
        self.ahead_bytes = ahead_bytes
        self._set_aside = set_aside  # for a segment that cannot be converted at all
        self._futures: dict[int, Future[Block]] = {}  # segment number -> its conversion
        self._lock = threading.Lock()

    def fill(self) -> None:
        """Keeps every worker busy on the oldest segments waiting to be written."""
        if not self.converter.running:
            return  # converting in the writer thread (or stopped): nothing to do ahead
        with self._lock:
            held = 0
            waiting = [s for s in list(self.spool.pending) if not s.written]
            for segment in waiting[:self.converter.workers + 1]:
                if held and held + segment.size > self.ahead_bytes:
                    return
                if segment.number not in self._futures:
                    future = self._submit(segment)
                    if future is None:
                        return  # the workers are being replaced
                    self._futures[segment.number] = future
                held += segment.size

    def block(self, segment: Segment) -> Block | None:
        """The segment's converted block; None when it cannot be converted at all (then the
        segment is set aside, not retried forever)."""
        with self._lock:
            future = self._futures.get(segment.number)
            if future is None:
                future = self._submit(segment)
                if future is not None:
                    self._futures[segment.number] = future
        if future is None:  # no workers: convert here, in the writer thread
            future = self._convert_here(segment)
        try:
            try:
                block = future.result()
                self.converter.done()
            except BrokenProcessPool:  # a worker died: every conversion in flight is lost
                # The culprit may be this very segment: convert it here, once. Registered
                # first, so the new workers are not handed it meanwhile.
                mine: Future[Block] = Future()
                with self._lock:
                    self._futures.clear()
                    self._futures[segment.number] = mine
                self.converter.restart()
                block = self._convert_here(segment, into=mine).result()
        except ConversionError as error:
            self._set_aside(segment, error, "unconvertible")  # out of the queue, then forgotten
            self.forget(segment)
            return None
        except BaseException:  # a disk error, say: converted again when the loop retries
            self.forget(segment)
            raise
        for problem in block.problems:
            log.error("%s", problem)
        for reason, spans in block.dropped_by.items():  # unstorable, undecodable: in dead/
            self.metrics.dropped.labels(reason).inc(spans)
        return block

    def forget(self, segment: Segment) -> None:
        """Once the segment is written (or set aside)."""
        with self._lock:
            self._futures.pop(segment.number, None)

    def _submit(self, segment: Segment) -> Future[Block] | None:
        """Hands the segment to a worker (None when there is none); call with the lock."""
        future = self.converter.submit(segment.path)
        if future is not None:
            self.metrics.conversions.inc()
        return future

    def _convert_here(self, segment: Segment, into: Future[Block] | None = None,
                      ) -> Future[Block]:
        self.metrics.conversions.inc()
        return self.converter.inline(segment.path, into)
