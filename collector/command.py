"""``rewind collector``: the production ingest service. Every flag is also a ``REWIND_*``
environment variable (names in ``server_settings.ENV``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from rewind.collector.access.auth import TokenSource
from rewind.collector.store.server_settings import (
    ENV,
    ENV_CLICKHOUSE_URL,
    BatchPolicy,
    ConfigError,
    IngestOptions,
    Limits,
    TlsFiles,
    parse_size,
)
from rewind.collector.store.store import resolve_url
from rewind.exporter.core.errors import RewindError

LIMITS, BATCH, OPTIONS = Limits(), BatchPolicy(), IngestOptions()


def _option(*names: str, key: str, **kwargs: object):  # type: ignore[no-untyped-def]
    return click.option(*names, envvar=ENV[key], show_envvar=True, **kwargs)


@click.command("collector")
@click.option("--clickhouse", envvar=ENV_CLICKHOUSE_URL, show_envvar=True, default=None,
              help="Store URL: http(s)://user:pass@host:8123/db, or chdb:///abs/path "
                   "(embedded; only one process may open it). Default: ./.rewind/store.")
@_option("--host", key="host", default=OPTIONS.host, show_default=True,
         help="Address both receivers listen on. Non-loopback needs auth or "
              "--allow-insecure-bind.")
@_option("--grpc-port", key="grpc_port", type=int, default=OPTIONS.grpc_port, show_default=True,
         help="OTLP/gRPC port (0: any free port).")
@_option("--http-port", key="http_port", type=int, default=OPTIONS.http_port, show_default=True,
         help="OTLP/HTTP port, also serving /health, /ready, /metrics (0: any free port).")
@_option("--spool-dir", key="spool_dir", type=click.Path(file_okay=False, path_type=Path),
         default=None, help="Write-ahead spool. Default: next to an embedded store, else "
                            "./.rewind/spool. One collector per directory.")
@_option("--spool-max-bytes", key="spool_max_bytes", default="1GiB", show_default=True,
         help="Disk bound of the spool; beyond it requests get 503/UNAVAILABLE + Retry-After.")
@_option("--auth-tokens-file", key="auth_tokens_file", default=None,
         type=click.Path(dir_okay=False, path_type=Path),
         help="Bearer tokens, one per line: 'token' or 'token tenant'. Reloaded when the "
              "file changes or on SIGHUP. Wrong tokens back off: 429/RESOURCE_EXHAUSTED "
              f"after 5 from one address, {ENV['auth_backoff_seconds']} seconds at first "
              "(default 1).")
@_option("--auth-tokens", key="auth_tokens", default=None,
         help="Bearer tokens inline, comma-separated 'token' or 'token tenant' entries.")
@_option("--auth-reload-seconds", key="auth_reload_seconds", type=float,
         default=OPTIONS.auth_reload_s, show_default=True,
         help="How often the tokens file is checked for changes (0: only on SIGHUP).")
@_option("--allow-insecure-bind", key="allow_insecure_bind", is_flag=True, default=False,
         help="Allow a non-loopback --host without authentication.")
@_option("--tls-cert", key="tls_cert", default=None, help="Server certificate (PEM).")
@_option("--tls-key", key="tls_key", default=None, help="Server private key (PEM).")
@_option("--tls-client-ca", key="tls_client_ca", default=None,
         help="CA bundle for client certificates (mutual TLS; counts as authentication).")
@_option("--max-message-bytes", key="max_message_bytes", default="64MiB", show_default=True,
         help="Largest request, compressed or not.")
@_option("--max-spans-per-request", key="max_spans_per_request", type=int,
         default=LIMITS.max_spans_per_request, show_default=True,
         help="Most spans one export request may carry; a larger one is refused whole.")
@_option("--max-attribute-bytes", key="max_attribute_bytes", default="16MiB",
         show_default=True, help="Largest attribute value; spans beyond it are rejected.")
@_option("--batch-max-spans", key="batch_max_spans", type=int, default=BATCH.max_spans,
         show_default=True, help="Spans per insert.")
@_option("--batch-max-bytes", key="batch_max_bytes", default="32MiB", show_default=True,
         help="Bytes per insert.")
@_option("--batch-timeout-ms", key="batch_timeout_ms", type=int,
         default=int(BATCH.timeout_s * 1000), show_default=True,
         help="Longest wait before a partial batch is written.")
@_option("--convert-ahead-bytes", key="convert_ahead_bytes", default="256MiB", show_default=True,
         help="Spooled bytes converted ahead of the store (as files next to the spool).")
@_option("--convert-workers", key="convert_workers", type=click.IntRange(0, 64),
         default=BATCH.convert_workers, show_default="cores - 1, at most 4",
         help="Processes converting batches for the store; 0 converts in the collector itself.")
@_option("--shutdown-timeout", key="shutdown_timeout", type=float,
         default=OPTIONS.shutdown_timeout_s, show_default=True,
         help="Seconds to keep writing queued spans on shutdown; the rest stays spooled.")
@_option("--requeue-dead", key="requeue_dead", is_flag=True, default=False,
         help="At start, put everything kept aside in the spool's dead/ directory (batches "
              "or single records the store refused as bad data, segments with a broken "
              "header) back in the queue, to be written again; use it after upgrading the "
              "collector or fixing the store. Copies of damaged segments (*.damaged) stay.")
@_option("--migrate/--no-migrate", key="migrate", default=True, show_default=True,
         help="Create or upgrade the tables when the store is first reached.")
@_option("--log-format", key="log_format", type=click.Choice(["text", "json"]),
         default="text", show_default=True, help="Log lines as text or as one JSON object each.")
@_option("--log-level", key="log_level",
         type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
         default="info", show_default=True, help="Least severe log lines written.")
def collector(clickhouse: str | None, host: str, grpc_port: int, http_port: int,
              spool_dir: Path | None, spool_max_bytes: str, auth_tokens_file: Path | None,
              auth_tokens: str | None, auth_reload_seconds: float,
              allow_insecure_bind: bool, tls_cert: str | None,
              tls_key: str | None, tls_client_ca: str | None, max_message_bytes: str,
              max_spans_per_request: int, max_attribute_bytes: str, batch_max_spans: int,
              batch_max_bytes: str, batch_timeout_ms: int, convert_ahead_bytes: str,
              convert_workers: int, shutdown_timeout: float, requeue_dead: bool, migrate: bool,
              log_format: str, log_level: str) -> None:
    """OTLP/gRPC and OTLP/HTTP receivers writing into ClickHouse through a durable spool."""
    from rewind.collector.ingest.service import run_collector
    from rewind.collector.wire import logs

    logs.configure(log_format, getattr(logging, log_level.upper()))
    try:
        if bool(tls_cert) != bool(tls_key):
            raise ConfigError("--tls-cert and --tls-key go together")
        options = IngestOptions(
            host=host, grpc_port=grpc_port, http_port=http_port, spool_dir=spool_dir,
            spool_max_bytes=parse_size(spool_max_bytes, "--spool-max-bytes"),
            limits=Limits(parse_size(max_message_bytes, "--max-message-bytes"),
                          max_spans_per_request,
                          parse_size(max_attribute_bytes, "--max-attribute-bytes")),
            batch=BatchPolicy(max_spans=batch_max_spans,
                              max_bytes=parse_size(batch_max_bytes, "--batch-max-bytes"),
                              timeout_s=batch_timeout_ms / 1000,
                              convert_ahead_bytes=parse_size(convert_ahead_bytes,
                                                          "--convert-ahead-bytes"),
                              convert_workers=convert_workers),
            auth_source=(TokenSource(auth_tokens_file, auth_tokens)
                         if auth_tokens_file or auth_tokens else None),
            auth_reload_s=auth_reload_seconds,
            tls=TlsFiles(tls_cert, tls_key, tls_client_ca) if tls_cert and tls_key else None,
            allow_insecure_bind=allow_insecure_bind, migrate=migrate,
            requeue_dead=requeue_dead,
            shutdown_timeout_s=shutdown_timeout)
        run_collector(resolve_url(clickhouse), options,
                      announce=lambda line: print(line, flush=True))
    except (RewindError, OSError) as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
