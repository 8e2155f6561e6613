"""A service run under replay from one or several request traces (``scoped.py`` in the child):
``rewind-replay --trace-id A --trace-id B -- uvicorn app:app``, and ``rewind replay-request
ID --url URL -- CMD``, which also sends the request, stops the command and compares.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import InvalidValue, RewindError
from rewind.replay.cassette.inbound import response_form
from rewind.replay.cassette.model import Cassette
from rewind.replay.play import launch, sealed
from rewind.replay.play.replay_settings import (
    CLOCK_RECORDED,
    SCOPED_INSTALLER,
    STRICT,
    ReplaySettings,
    clock,
    replay_mode,
)
from rewind.replay.play.report import ReplayReport
from rewind.replay.play.runner import DIVERGED_EXIT, going_live
from rewind.replay.play.services.recorded_request import (
    RequestOutcome,
    inbound_of,
    outcome_of,
    request_headers,
)

READY_TIMEOUT = 60.0


class ServiceError(RewindError):
    """The replayed service could not be reached, or ended before it answered."""


@dataclass
class ServiceOutcome:
    exit_code: int
    reports: list[ReplayReport]
    unrecorded: int = 0  # inbound requests that were no recorded one (health checks ...)
    outside: list[str] = field(default_factory=list)  # calls refused outside a recorded request
    installed: bool = True
    served: dict[str, int] = field(default_factory=dict)  # trace id -> times its request came


def _read(report_path: Path, cassettes: Sequence[Cassette], mode: str) -> ServiceOutcome:
    """What the child reported (its exit code left to the caller)."""
    try:
        data = json.loads(report_path.read_text("utf-8"))
    except (FileNotFoundError, ValueError):
        return ServiceOutcome(0, [ReplayReport(trace_id=c.trace_id, mode=replay_mode(mode),
                                               recorded=len(c.interactions),
                                               match_keys=c.match_keys)
                                  for c in cassettes], installed=False)
    return ServiceOutcome(0, [ReplayReport.from_dict(r) for r in data.get("reports") or []],
                          int(data.get("unrecorded") or 0),
                          [str(x) for x in data.get("outside") or []], True,
                          {str(k): int(v) for k, v in (data.get("served") or {}).items()})


@contextmanager
def _prepared(cassettes: Sequence[Cassette], mode: str, speed: float | None, debug: bool,
              allow_live: Sequence[str], ignore: Sequence[str], clock_mode: str
              ) -> Iterator[tuple[dict[str, str | None], Path]]:
    chosen = ReplaySettings("", mode=replay_mode(mode), speed=speed, debug=debug,
                            allow_live=tuple(allow_live), ignore=tuple(ignore),
                            clock=clock(clock_mode))
    for cassette in cassettes:
        inbound = cassette.inbound
        if inbound is None or inbound.kind != A.INBOUND_KIND_REQUEST:
            raise InvalidValue(f"trace {cassette.trace_id} is no recorded request of a service: "
                             "several traces replay in one process only when each is one")
    with tempfile.TemporaryDirectory(prefix="rewind-replay-") as tmp:
        path = os.path.join(tmp, "cassettes.json")
        Path(path).write_text(json.dumps([c.to_dict() for c in cassettes]), "utf-8")
        report = Path(tmp, "report.json")
        source = cassettes[0].trace_id if len(cassettes) == 1 else None
        yield replace(chosen, cassette_path=path, report_path=str(report),
                      source_trace_id=source).to_env(), report


def run_service(cassettes: Sequence[Cassette], command: list[str], mode: str = STRICT,
                speed: float | None = None, debug: bool = False,
                allow_live: Sequence[str] = (), ignore: Sequence[str] = (),
                clock_mode: str = CLOCK_RECORDED, seal: bool = True) -> ServiceOutcome:
    """``command`` run to its end (stopped with SIGINT or SIGTERM, which reach it), each
    inbound request answered from the trace it matches; ``seal``: in a network namespace of
    its own where it can be (its ports served from outside at the same numbers)."""
    sealing = sealed.choose(seal, going_live(mode, allow_live), serves=True)
    with _prepared(cassettes, mode, speed, debug, allow_live, ignore, clock_mode) as (env, path):
        exit_code = launch.run(command, env, [SCOPED_INSTALLER], sealing=sealing)
        outcome = _read(path, cassettes, mode)
    outcome.reports = [replace(r, isolation=sealing.describe()) for r in outcome.reports]
    diverged = mode == STRICT and (
        bool(outcome.outside) or any(r.divergence is not None for r in outcome.reports))
    outcome.exit_code = DIVERGED_EXIT if diverged else exit_code
    return outcome


def _send(url: str, method: str, headers: dict[str, str], body: bytes,
          timeout: float = 120) -> tuple[int, str, bytes]:
    """(status, content type, body)."""
    request = urllib.request.Request(url, body or None, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get("content-type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("content-type", ""), error.read()


def wait_until_answering(url: str, child: Any, timeout: float = READY_TIMEOUT) -> None:
    """Returns once anything answers HTTP at ``url`` (any status)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:  # the app's own failure: its output says why
            raise ServiceError(f"the command ended (exit code {child.returncode}) before "
                               f"{url} answered", hint="its output above says why",
                               exit_code=child.returncode or 1)
        try:
            _send(url, "GET", {}, b"", timeout=2)
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise ServiceError(f"nothing answered at {url} within {timeout:.0f} s")


def replay_over_http(cassette: Cassette, url: str, command: list[str],
                     mode: str = STRICT, allow_live: tuple[str, ...] = (),
                     ignore: tuple[str, ...] = (), clock_mode: str = CLOCK_RECORDED,
                     ready_timeout: float = READY_TIMEOUT, seal: bool = True) -> RequestOutcome:
    """``command`` started under replay, the recorded request sent to it at ``url`` once it
    answers, the command stopped; the answer compared with the recorded one. Sealed where it
    can be when ``url`` is on loopback (the request is carried in)."""
    inbound = inbound_of(cassette, A.INBOUND_KIND_REQUEST)
    local = (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")
    sealing = sealed.choose(seal, going_live(mode, allow_live) or (
        "" if local else f"{url} is not on loopback"), serves=True)
    with _prepared([cassette], mode, None, False, allow_live, ignore, clock_mode) as (env, path):
        child = launch.start(command, env, [SCOPED_INSTALLER], sealing=sealing)
        try:
            with launch.forwarded_to(child):
                wait_until_answering(url, child, ready_timeout)
                target = url.rstrip("/") + inbound.path + (f"?{inbound.query}"
                                                           if inbound.query else "")
                status, content_type, body = _send(target, inbound.method,
                                                   request_headers(inbound),
                                                   inbound.request_bytes())
        finally:
            launch.stop(child)
        served = _read(path, [cassette], mode)
    reports = [replace(r, isolation=sealing.describe()) for r in served.reports]
    outside = served.outside
    if not served.installed:
        raise ServiceError(f"the replay was not installed in {command[0]} "
                           f"({launch.why_not_installed(command)})")
    report = reports[0]
    if outside and report.divergence is None and mode == STRICT:
        from rewind.replay.play.divergence import Divergence

        report = replace(report, divergence=Divergence(
            0, f"{outside[0]}: the request sent was not matched with the recorded one"))
    from rewind.replay.play.session import ReplaySession

    session = ReplaySession(cassette, mode=mode, ignore=ignore)
    outcome = outcome_of(session, inbound, inbound.response_form(),
                         None if report.divergence is not None and mode == STRICT
                         else response_form(status, body, content_type), ignore)
    outcome.report = report
    if outcome.missed_route:
        outcome.hint = base_url_hint(url, inbound.path)
    return outcome


def base_url_hint(url: str, path: str) -> str:
    """--url is where the server is; the recorded path is added to it."""
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    given = f", not {url}" if parts.path.strip("/") else ""
    return f"--url must be the server's base URL, {base}{given}; the recorded path {path} " \
           "is added to it"
