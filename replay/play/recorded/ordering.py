"""When a recorded answer goes back: held for its recorded latency (``--speed``) and until
the calls in flight with it that finished first have had theirs, so a program that sent
several calls at once sees them finish in the recorded order."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rewind.replay.cassette.model import Wait

ORDER_TIMEOUT_S = 2.0  # the longest an answer waits for those recorded as finishing before it
# The longest an answer then keeps the recorded gap after them: what the program does with an
# answer once it has it (parse, hand on to a queue) takes time, and the next answer must not
# overtake it there.
ORDER_GAP_S = 0.1


class Order:
    """The answers released so far, against what each must wait for (``waits_for``)."""

    def __init__(self, waits: dict[str, Wait]) -> None:
        self.waits = waits  # by span id
        self.released: set[str] = set()
        self.opened = False  # a divergence: nothing waits any more
        self.changed = threading.Condition()

    def blocked(self, span_id: str) -> bool:
        wait = self.waits.get(span_id)
        return not self.opened and wait is not None and not wait.first <= self.released

    def gap_s(self, span_id: str) -> float:
        wait = self.waits.get(span_id)
        return 0.0 if self.opened or wait is None else min(wait.gap_ns / 1e9, ORDER_GAP_S)

    def release(self, span_id: str) -> None:
        with self.changed:
            self.released.add(span_id)
            self.changed.notify_all()

    def open(self) -> None:
        with self.changed:
            self.opened = True
            self.changed.notify_all()


@dataclass
class Hold:
    """One answer held back: for its recorded latency (``--speed``), then until the answers of
    the calls in flight with it that finished first are out, at most :data:`ORDER_TIMEOUT_S`
    more (a call the program no longer makes holds nothing up for long), and the recorded gap
    after them (at most :data:`ORDER_GAP_S`). For threads and asyncio alike; the answer is
    released when the wait ends, however it ends."""

    order: Order
    span_id: str
    latency_s: float
    since: float = field(default_factory=time.monotonic)

    def wait(self) -> None:
        try:
            time.sleep(max(self.since + self.latency_s - time.monotonic(), 0.0))
            deadline = time.monotonic() + ORDER_TIMEOUT_S
            with self.order.changed:
                self.order.changed.wait_for(lambda: not self.order.blocked(self.span_id),
                                            timeout=max(deadline - time.monotonic(), 0.0))
            time.sleep(self.order.gap_s(self.span_id))
        finally:
            self.order.release(self.span_id)

    async def wait_async(self) -> None:
        import asyncio

        try:
            await asyncio.sleep(max(self.since + self.latency_s - time.monotonic(), 0.0))
            deadline = time.monotonic() + ORDER_TIMEOUT_S
            while self.order.blocked(self.span_id) and time.monotonic() < deadline:
                await asyncio.sleep(0.002)
            await asyncio.sleep(self.order.gap_s(self.span_id))
        finally:
            self.order.release(self.span_id)

    async def then(self, value: Any) -> Any:
        """``value`` once the wait is over (what an asynchronous client awaits)."""
        await self.wait_async()
        return value
