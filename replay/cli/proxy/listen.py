"""``rewind proxy``: a recording proxy that stays up, for agents Python hooks cannot reach; and
the ``--proxy`` flag of ``rewind record`` and ``rewind replay`` (the run in one command)."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

import click

from rewind.exporter.core.process_settings import ENV_CAPTURE
from rewind.replay.cli.failure import attempt, note, warn
from rewind.replay.cli.options import HELP_OPTIONS, clickhouse_option

DEFAULT_PORT = 8790

proxy_option = click.option(
    "--proxy", is_flag=True,
    help="Through a local HTTP proxy the command's SDKs reach by their base-URL variables "
         "(OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL): for programs in "
         "any language (curl, Node). A run recorded so replays through it by itself.")


def intercept_options(command: Any) -> Any:
    """``--intercept`` and ``--intercept-host`` (``rewind record``)."""
    command = click.option(
        "--intercept-host", "intercept_hosts", multiple=True, metavar="HOST",
        help="One more host to intercept (an OpenAI-compatible provider's), an endpoint of "
             "its own on the proxy; repeatable; implies --intercept.")(command)
    return click.option(
        "--intercept", is_flag=True,
        help="--proxy, and HTTPS to the providers' hosts (api.openai.com, api.anthropic.com, "
             "generativelanguage.googleapis.com) intercepted too, for programs whose base URL "
             "cannot be changed: the command runs with HTTPS_PROXY at mitmproxy's mitmdump "
             "and trusts the local CA `rewind init` made; other hosts pass untouched, "
             "unread. A run recorded so is intercepted again when replayed.")(command)


def intercepted(intercept: bool, hosts: tuple[str, ...]) -> tuple[str, ...] | None:
    """The hosts to intercept besides the providers' (None: no interception), once mitmdump
    and the CA are found, so that a missing one fails before anything starts."""
    if not intercept and not hosts:
        return None
    from rewind.replay.play.proxy.intercept.interceptor import check, routes

    routes(hosts)
    check()
    return hosts


@click.command("proxy", context_settings=HELP_OPTIONS)
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True,
              help="Loopback port to listen on (0: any free one).")
@click.option("--endpoint", default=None, help="OTLP endpoint for the spans, as for rewind "
              "record (when none answers and none is named, a collector started here writes "
              "into the store).")
@clickhouse_option
@click.option("--name", default="rewind-proxy", show_default=True, help="Service name.")
@click.option("--capture", type=click.Choice(["full", "content", "metadata"]), default=None,
              help=f"What to capture. Default: {ENV_CAPTURE}, else full.")
@click.option("--upstream", "upstreams", multiple=True, metavar="NAME=URL",
              help="One more endpoint, /NAME on the proxy, leading to URL (an OpenAI-"
                   "compatible server, say); repeatable.")
@click.option("--idle", type=float, default=60.0, show_default=True,
              help="Seconds after the last call of an X-Rewind-Trace key that its trace ends.")
def proxy(port: int, endpoint: str | None, clickhouse: str | None, name: str,
          capture: str | None, upstreams: tuple[str, ...], idle: float) -> None:
    """Record every LLM call sent through this proxy, until Ctrl-C.

    \b
        rewind proxy
        export OPENAI_BASE_URL=http://127.0.0.1:8790/openai/v1
        node agent.js

    Each endpoint (/openai, /anthropic, /gemini) forwards to where its variable pointed
    when the proxy started (else the provider), every byte, streams as they arrive; the
    exchange is recorded as in-process capture records it (credential headers are sent
    on, never stored). Calls with one X-Rewind-Trace header value are one trace; a W3C
    traceparent joins the caller's trace; any other call is a trace of its own.
    """
    from rewind.replay.play.proxy.proxy_runs import ProxyRecording
    from rewind.replay.play.proxy.upstreams import parse_extra
    from rewind.replay.play.recorder import (
        collector_here,
        collector_reachable,
        endpoint_for,
        endpoint_named,
    )

    extra = attempt(lambda: parse_extra(upstreams))
    target = endpoint_for(endpoint)
    here: Any = None
    if not collector_reachable(target) and not endpoint_named(endpoint):
        note(f"rewind: nothing answers at {target}; a collector started here stores the calls")
        here = collector_here(clickhouse)
        target, _ = attempt(here.__enter__)
    try:
        recording = attempt(lambda: ProxyRecording(target, name, capture, (), extra,
                                                   port, root=False, idle_s=idle))
        attempt(recording.__enter__)
        try:
            note(f"rewind: recording proxy on {recording.url}; for the command's shell:")
            for variable, value in recording.upstreams.child_env(recording.url).items():
                click.echo(f"export {variable}={value}")
            for other in sorted(set(recording.upstreams.bases) - {"openai", "anthropic",
                                                                     "gemini"}):
                click.echo(f"# {other}: {recording.upstreams.endpoint(recording.url, other)}")
            sys.stdout.flush()
            _wait_for_a_stop()
        finally:
            recording.close()
        traces = recording.app.traces()
    finally:
        if here is not None:
            here.__exit__(None, None, None)
    for trace_id in traces:
        note(f"rewind: recorded trace {trace_id}")
    if not traces:
        warn("no call went through the proxy")


def _wait_for_a_stop() -> None:
    """Until SIGINT or SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
