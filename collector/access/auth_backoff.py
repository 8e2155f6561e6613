"""Guessing tokens made slow: failed authentication backs off, per client address and per token
prefix, for the collector's receivers, the worker and its sign-in form alike (they all check
through :class:`~rewind.collector.access.auth.Authenticator`, which holds one of these).

A key (an address, or the first characters of a presented token) gets :data:`FREE_FAILURES`
wrong tokens; each one after them closes the key for ``base_s * 2**n`` seconds (at most
``max_s``). While a key is closed its requests are refused before any token is compared (429
with ``Retry-After``; gRPC ``RESOURCE_EXHAUSTED``), so a closed key learns nothing; once it
opens, the right token works and clears the key. A request without a token is no guess and is
never counted. At most ``capacity`` keys are remembered, the least recently used forgotten
first, so a flood of addresses or prefixes cannot grow memory.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from rewind.exporter.core.errors import RewindError

FREE_FAILURES = 5  # a typo or two, a rotated token tried by a few senders
PREFIX_CHARS = 6  # a prefix of a token names it to the limiter, never the whole secret
DEFAULT_CAPACITY = 10_000
DEFAULT_MAX_S = 300.0


class TooManyFailures(RewindError):
    """Refused without looking at the token: too many wrong ones came from here lately."""

    http_status = 429

    def __init__(self, retry_after_s: float) -> None:
        self.retry_after = max(1, math.ceil(retry_after_s))  # whole seconds, as HTTP says
        super().__init__(f"too many failed authentications: try again in {self.retry_after} s")


@dataclass
class _Key:
    failures: int = 0
    closed_until: float = 0.0


class AuthBackoff:
    """Failure counts by key, bounded. ``observe`` hears each ``failed`` (a wrong token) and
    ``throttled`` (refused while closed) event, for the metrics."""

    def __init__(self, base_s: float = 1.0, max_s: float = DEFAULT_MAX_S,
                 capacity: int = DEFAULT_CAPACITY,
                 observe: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base_s = base_s
        self.max_s = max(max_s, base_s)
        self.capacity = capacity
        self.observe = observe
        self._clock = clock
        self._keys: OrderedDict[str, _Key] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._keys)

    @staticmethod
    def keys(client: str | None, token: str) -> tuple[str, ...]:
        by_prefix = "token:" + token[:PREFIX_CHARS]
        return (f"client:{client}", by_prefix) if client else (by_prefix,)

    def check_open(self, client: str | None, token: str) -> None:
        """Raises :class:`TooManyFailures` while any key of this request is closed."""
        now = self._clock()
        with self._lock:
            wait = max((key.closed_until - now for name in self.keys(client, token)
                        if (key := self._keys.get(name)) is not None), default=0.0)
        if wait > 0:
            self._tell("throttled")
            raise TooManyFailures(wait)

    def failed(self, client: str | None, token: str) -> None:
        now = self._clock()
        with self._lock:
            for name in self.keys(client, token):
                key = self._keys.pop(name, None) or _Key()
                key.failures += 1
                if key.failures > FREE_FAILURES:
                    doubling = min(key.failures - FREE_FAILURES - 1, 30)
                    key.closed_until = now + min(self.max_s, self.base_s * 2 ** doubling)
                self._keys[name] = key  # the most recent last
            while len(self._keys) > self.capacity:
                self._keys.popitem(last=False)
        self._tell("failed")

    def succeeded(self, client: str | None, token: str) -> None:
        with self._lock:
            for name in self.keys(client, token):
                self._keys.pop(name, None)

    def _tell(self, event: str) -> None:
        if self.observe is not None:
            self.observe(event)
