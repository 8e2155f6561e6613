"""Commands run through the proxy: ``rewind record --proxy -- CMD`` (a recording proxy in this
process for the command: its base-URL variables point at it, one trace per run under a root
span the proxy opens) and the replay of a run recorded that way (``rewind-replay``: the same
endpoints answer from the recording, the command sealed as any strict replay is).

The recording's resource says it went through the proxy (``rewind.proxy.upstreams``: where
each endpoint led, without credentials); a replay of it goes through the proxy by itself and
hands the command the recorded base paths, so its requests match those recorded. A run recorded
with HTTPS interception (``--intercept``: ``rewind.proxy.intercept``, the hosts and their
endpoints) is replayed through mitmdump again (``intercept/``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any

from rewind.exporter.core import attributes as A
from rewind.replay.cassette.model import Cassette
from rewind.replay.play import guard, launch, runner, sealed
from rewind.replay.play.replay_settings import (
    CLOCK_RECORDED,
    ENV_PROXY_URL,
    STRICT,
    ReplaySettings,
    clock,
    replay_mode,
)
from rewind.replay.play.runner import DEFAULT_TIMEOUT_S, DIVERGED_EXIT, ReplayOutcome

# Every `rewind replay` and `rewind record` comes through here, most not through a proxy: what
# only a proxy needs (the upstreams table, which loads redaction; the listener; the recording
# side) is imported by the runs that use it.
if TYPE_CHECKING:
    from rewind.replay.play.recorder import RecordOutcome

FLUSH_TIMEOUT_MS = 30_000
KILL_AFTER_S = 5.0  # a command told to stop after a divergence, before it is killed


class ProxyRecording:
    """A recording proxy on loopback from ``with`` to its end, its spans sent over OTLP to
    ``endpoint`` by a tracer provider of its own (the exporter's pipeline). ``root``: open a
    root span (``invoke_agent {name}``) that calls naming no trace join; ``command``: the
    command recorded, saved with the run as ``rewind record`` saves it; ``intercept``: the
    hosts HTTPS interception leads here ({host: endpoint}), marked on the recording."""

    def __init__(self, endpoint: str, name: str, capture: str | None = None,
                 command: Sequence[str] = (), upstreams: Mapping[str, str] | None = None,
                 port: int = 0, root: bool = True, idle_s: float = 60.0,
                 intercept: Mapping[str, str] | None = None) -> None:
        from opentelemetry.trace import SpanKind

        from rewind.exporter.core import scope
        from rewind.exporter.core.process_settings import settings as capture_settings
        from rewind.exporter.core.redaction import Redactor, masked_argv
        from rewind.exporter.otlp.otel_pipeline import build_provider
        from rewind.replay.play.proxy.forwarding import RecordingProxy
        from rewind.replay.play.proxy.listener import Listener
        from rewind.replay.play.proxy.upstreams import Upstreams
        from rewind.replay.sources.commands import sign

        settings = capture_settings(capture)
        if intercept:
            from rewind.replay.play.proxy.intercept.interceptor import named_upstreams

            upstreams = {**named_upstreams(intercept), **(upstreams or {})}
        self.upstreams = Upstreams.from_env(os.environ, upstreams)
        resource: dict[str, Any] = {
            A.PROXY_UPSTREAMS: json.dumps(self.upstreams.recorded(), sort_keys=True)}
        if intercept:
            resource[A.PROXY_INTERCEPT] = json.dumps(dict(intercept), sort_keys=True)
        if command:
            words = masked_argv(command, Redactor(settings.redact))
            resource[A.PROCESS_COMMAND_ARGS] = json.dumps(words)
            if signature := sign(words):
                resource[A.COMMAND_SIGNATURE] = signature
        self.provider = build_provider(name, endpoint, attributes=resource)
        self.root = None
        if root:  # as a recorded process's root (autorecord.open_process_root)
            self.root = self.provider.get_tracer(scope.TRACER_NAME).start_span(
                f"invoke_agent {name}", kind=SpanKind.INTERNAL,
                attributes={A.OPERATION: "invoke_agent", A.AGENT_NAME: name})
        self.app = RecordingProxy(self.provider, settings, self.upstreams, self.root, idle_s)
        self.listener = Listener(self.app, port)

    @property
    def url(self) -> str:
        return self.listener.url

    def child_env(self) -> dict[str, str]:
        """What a command gets to send its calls here: the base-URL variables, and the
        proxy's own URL (``--upstream`` endpoints are under it)."""
        return {**self.upstreams.child_env(self.url), ENV_PROXY_URL: self.url}

    def __enter__(self) -> ProxyRecording:
        try:
            self.listener.start()
        except BaseException:
            self.provider.shutdown()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, end the open roots and send every span."""
        from rewind.exporter.core.scope import end_quietly

        self.listener.stop()
        self.app.roots.close()
        if self.root is not None:
            end_quietly(self.root)
        self.provider.force_flush(FLUSH_TIMEOUT_MS)
        self.provider.shutdown()

    def report(self) -> dict[str, Any]:
        """This run as ``rewind record`` reads a recorded process's line."""
        from rewind.exporter.capture.recording import counts
        from rewind.exporter.otlp.otel_pipeline import export_stats

        traces = self.app.traces()
        return {"pid": os.getpid(), "root_trace_id": traces[0] if self.root else None,
                "trace_ids": traces, "export": export_stats(), "calls": dict(counts)}


def run_recorded(command: list[str], endpoint: str | None = None, name: str | None = None,
                 capture: str | None = None, settings: Mapping[str, str | None] | None = None,
                 wait: bool = True, proxy: bool = False,
                 intercept: Sequence[str] | None = None) -> RecordOutcome:
    """``recorder.run_recorded``, or with ``proxy`` the command's calls recorded by a proxy
    in this process; ``intercept`` (hosts besides the providers'): HTTPS to those hosts too,
    through mitmdump."""
    from rewind.replay.play import recorder

    if not proxy and intercept is None:
        return recorder.run_recorded(command, endpoint, name, capture, settings, wait=wait)
    chosen = recorder.endpoint_for(endpoint)
    hosts = None
    if intercept is not None:
        from rewind.replay.play.proxy.intercept.interceptor import routes

        hosts = routes(intercept)
    with ProxyRecording(chosen, name or recorder.run_name(command), capture,
                        command, intercept=hosts) as running, \
            _intercepting(running.url, hosts) as intercepted:
        exit_code = launch.run(command, {**running.child_env(), **intercepted,
                                         **(settings or {})})
    outcome = recorder.RecordOutcome(exit_code, chosen, [running.report()])
    if wait:
        recorder.wait_until_readable(outcome)
    return outcome


def run_recorded_here(command: list[str], url: str | None, name: str | None,
                      capture: str | None, proxy: bool = False,
                      intercept: Sequence[str] | None = None) -> tuple[RecordOutcome, str]:
    """``recorder.run_recorded_here``, through a proxy (and mitmdump) when asked."""
    from rewind.replay.play import recorder

    if not proxy and intercept is None:
        return recorder.run_recorded_here(command, url, name, capture)
    with recorder.collector_here(url) as (endpoint, stored):
        outcome = run_recorded(command, endpoint, name, capture, wait=False, proxy=True,
                               intercept=intercept)
    return outcome, stored


def run_command(cassette: Cassette, command: list[str], mode: str = STRICT,
                speed: float | None = None, debug: bool = False,
                allow_live: Sequence[str] = (), ignore: Sequence[str] = (),
                clock_mode: str = CLOCK_RECORDED, timeout: float | None = DEFAULT_TIMEOUT_S,
                stdout: IO[Any] | None = None, settings: launch.Settings | None = None,
                allow_unused: bool = False, seal: bool = True, proxy: bool = False,
                ) -> ReplayOutcome:
    """``runner.run_command``; through the proxy when asked (``proxy``) or when the run was
    recorded through one. ``debug`` and ``clock_mode`` act in a Python process only: the
    proxy's command is whatever it is."""
    if not (proxy or cassette.proxy_upstreams):
        return runner.run_command(cassette, command, mode, speed, debug, allow_live, ignore,
                                  clock_mode, timeout, stdout, settings, allow_unused, seal)
    from rewind.replay.play.proxy.answering import ReplayingProxy
    from rewind.replay.play.proxy.listener import Listener
    from rewind.replay.play.proxy.upstreams import Upstreams
    from rewind.replay.play.session import ReplaySession

    chosen = ReplaySettings("", mode=replay_mode(mode), speed=speed,
                            allow_live=tuple(allow_live), ignore=tuple(ignore),
                            clock=clock(clock_mode))
    session = ReplaySession(cassette, mode=chosen.mode, speed=chosen.speed,
                            allow_live=chosen.allow_live, ignore=chosen.ignore,
                            clock=chosen.clock)
    upstreams = (Upstreams(dict(cassette.proxy_upstreams)) if cassette.proxy_upstreams
                 else Upstreams.from_env(os.environ))
    children: list[subprocess.Popen] = []
    ending = _Ending(children)
    goes_live = runner.going_live(chosen.mode, allow_live)
    sealing = sealed.choose(seal, goes_live)
    with Listener(ReplayingProxy(session, upstreams, ending.arm)) as listener, \
            _intercepting(listener.url, cassette.proxy_intercept, not goes_live) as intercepted, \
            launch.watching(children.append):
        env = {**upstreams.child_env(listener.url), ENV_PROXY_URL: listener.url,
               **intercepted, **(settings or {})}
        try:
            exit_code = launch.run(command, env, (), timeout, stdout, sealing)
        finally:
            ending.cancel()
    report = replace(session.report(), isolation=sealing.describe())
    diverged = report.divergence is not None and chosen.mode == STRICT
    early = (chosen.mode == STRICT and not diverged and not allow_unused and exit_code == 0
             and report.replayed < report.recorded)
    return ReplayOutcome(DIVERGED_EXIT if diverged or early else exit_code, report, True,
                         early, sealing)


@contextlib.contextmanager
def _intercepting(proxy_url: str, hosts: Mapping[str, str] | None,
                  refuse: bool = False) -> Iterator[dict[str, str]]:
    """mitmdump leading ``hosts`` to the proxy at ``proxy_url`` for the duration (``refuse``:
    every other host refused), and the command's variables; none without ``hosts``."""
    if not hosts:
        yield {}
        return
    from rewind.replay.play.proxy.intercept.interceptor import Interception

    with Interception(proxy_url, hosts, refuse) as running:
        yield running.child_env()


class _Ending:
    """After a strict divergence, the command gets the grace a replayed Python process gets to
    end by itself (``guard.GRACE_S``); then it is stopped (SIGTERM, then SIGKILL)."""

    def __init__(self, children: list[subprocess.Popen]) -> None:
        self.children = children
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def arm(self) -> None:
        with self._lock:
            if self._timer is None:
                self._timer = threading.Timer(guard.GRACE_S, self._stop)
                self._timer.daemon = True
                self._timer.start()

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()

    def _stop(self) -> None:
        for child in self.children:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(KILL_AFTER_S)
                if child.poll() is None:
                    child.kill()
