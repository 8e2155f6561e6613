"""``rewind record -- CMD``: the command, with its options and what it tells the user about the
run (trace ids, nothing stored, no LLM call seen). Loaded when it runs: ``rewind-replay`` never
needs it."""

from __future__ import annotations

import os
import sys

import click

from rewind.collector.store.server_settings import ENV as SERVER_ENV
from rewind.exporter.core.process_settings import ENV_CAPTURE
from rewind.replay.cli.failure import attempt, note, warn
from rewind.replay.cli.options import HELP_OPTIONS, clickhouse_option
from rewind.replay.cli.proxy.listen import intercept_options, intercepted, proxy_option

OTLP_TIMEOUT = "OTEL_EXPORTER_OTLP_TIMEOUT"  # seconds, as the Python exporters read it

NO_LLM_CALLS = (
    "no LLM call was recorded in this run ({http} other HTTP calls were). Likely causes: the "
    "program made none before it exited; its LLM client sends through a library Rewind does not "
    "hook (it hooks httpx, httpx2, requests, aiohttp, http.client with urllib and urllib3, "
    "and lm15's transports; not gRPC or a C extension); the "
    "endpoint's path is not an LLM API Rewind knows (…/chat/completions, …/responses, "
    "…/v1/messages, …:generateContent, …/embeddings); or the calls ran in a process started "
    "with another Python, where Rewind is not installed.")


@click.command(context_settings={"ignore_unknown_options": True, **HELP_OPTIONS})
@click.option("--endpoint", default=None, help="OTLP endpoint for the spans. Default: "
              "OTEL_EXPORTER_OTLP_ENDPOINT, else the local rewind serve (http://127.0.0.1:4317, "
              f"{SERVER_ENV['grpc_port']}); when none answers there, a collector started for "
              "the run writes into the store (--clickhouse).")
@clickhouse_option
@click.option("--name", default=None, help="Name of the run's root span and default service "
              "name. Default: the script or module run.")
@click.option("--capture", type=click.Choice(["full", "content", "metadata"]), default=None,
              help=f"What to capture. Default: {ENV_CAPTURE} as the recorded process reads "
              "it (an unreadable value means metadata), else full.")
@proxy_option
@intercept_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def record(endpoint: str | None, clickhouse: str | None, name: str | None, capture: str | None,
           proxy: bool, intercept: bool, intercept_hosts: tuple[str, ...],
           command: tuple[str, ...]) -> None:
    """Run COMMAND with every LLM and @tool call recorded, and print the trace id(s).

    \b
        rewind record -- python my_agent.py

    The recorded process reads REWIND_CAPTURE, REWIND_REDACT, REWIND_MAX_BODY_BYTES,
    REWIND_MATCH_KEY_SALT, REWIND_HTTP, REWIND_HTTP_HOSTS, REWIND_HTTP_EXCLUDE,
    REWIND_FRAMEWORK_TOOLS, REWIND_SERVERS, REWIND_GRPC, REWIND_MAX_QUEUE_BYTES,
    REWIND_MAX_EXPORT_BYTES, REWIND_CONTENT_AT and the OTEL_* variables (docs/configuration.md);
    under opentelemetry-instrument, REWIND_PROCESS_ROOT too. Each request a web app serves, and
    each @job call, is a trace of its own.
    """
    from rewind.collector.store.store import redact_url
    from rewind.replay.play import launch
    from rewind.replay.play.proxy.proxy_runs import run_recorded, run_recorded_here
    from rewind.replay.play.recorder import (
        READABLE_TIMEOUT,
        collector_reachable,
        endpoint_for,
        endpoint_named,
    )

    attempt(lambda: launch.check_command(command))
    hosts = attempt(lambda: intercepted(intercept, intercept_hosts))
    target = endpoint_for(endpoint)
    reachable = collector_reachable(target)
    if not reachable and not endpoint_named(endpoint):  # no rewind serve: a collector here
        note(f"rewind: nothing answers at {target}; recording through a collector started "
             "here for the run")
        outcome, stored = attempt(lambda: run_recorded_here(list(command), clickhouse, name,
                                                            capture, proxy, hosts))
        note(f"rewind: stored in {redact_url(stored)}")
    else:
        if not reachable:
            warn(f"nothing answers at {target}; start `rewind serve` or spans will be dropped")
        # Nothing to wait for at exit when nothing listens: the exporter gives up after 1 s.
        quick = {} if reachable or os.environ.get(OTLP_TIMEOUT) else {OTLP_TIMEOUT: "1"}
        outcome = attempt(lambda: run_recorded(list(command), endpoint, name, capture, quick,
                                               proxy=proxy, intercept=hosts))
    if not outcome.installed:
        warn(f"recording was not installed in the command ({launch.why_not_installed(command)})")
    totals = outcome.export_totals()
    exported, failed = totals.get("exported_spans", 0), totals.get("failed_spans", 0)
    dropped = totals.get("dropped_spans", 0)
    if outcome.trace_ids and not exported and (failed or dropped):
        warn(f"nothing was stored: the {failed + dropped} spans of trace "
             f"{', '.join(outcome.trace_ids)} did not reach {outcome.endpoint} (start `rewind "
             "serve`, or give the collector with --endpoint)")
        sys.exit(outcome.exit_code)
    for line in outcome.recorded_lines():
        note(line)
    if outcome.installed and not outcome.calls().get("llm"):
        warn(NO_LLM_CALLS.format(http=outcome.calls().get("http", 0)))
    if outcome.readable is False:
        warn(f"the worker at {outcome.worker} does not serve every span of the run yet "
             f"(waited {READABLE_TIMEOUT:.0f} s): `rewind inspect` may say not found for a "
             "moment; is the collector busy, or writing to another store?")
    if failed or dropped:
        warn(f"{exported} spans exported, {failed} failed, {dropped} dropped (collector at "
             f"{outcome.endpoint})")
    sys.exit(outcome.exit_code)
