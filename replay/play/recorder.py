"""``rewind record -- CMD``: runs a command with the exporter injected, as
``opentelemetry-instrument`` does, and reports the traces it recorded.

The child is started by :mod:`rewind.replay.play.launch`; ``REWIND_RECORD=1`` makes its
``sitecustomize`` call :func:`rewind.exporter.setup.autorecord.start_from_env`, which
instruments the process, opens one root span and, at exit, appends a JSON line (trace ids,
export figures) to the report file read here. Spans go to ``OTEL_EXPORTER_OTLP_ENDPOINT``, by
default the local ``rewind serve``. ``rewind fork`` records its child the same way, with its own
installer added.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from rewind.collector.store.server_settings import ENV, local_collector_endpoint
from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import InvalidValue
from rewind.exporter.core.process_settings import ENV_CAPTURE, RecordSettings
from rewind.exporter.core.process_settings import settings as capture_settings
from rewind.exporter.core.redaction import Redactor, masked_argv
from rewind.replay.play import launch
from rewind.replay.sources.cli_settings import worker_url
from rewind.replay.sources.commands import sign
from rewind.replay.sources.locate import store_in_use, worker_reachable
from rewind.replay.sources.trace_sources import ApiSource

READABLE_TIMEOUT = 15.0  # seconds the parent waits for the worker to see what was exported
FLUSH_TIMEOUT_S = 30.0  # a collector of its own: seconds to write what the run sent
_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
RESOURCE_VAR = "OTEL_RESOURCE_ATTRIBUTES"  # OpenTelemetry's: key=value pairs, values %-encoded


@dataclass
class RecordOutcome:
    exit_code: int
    endpoint: str
    processes: list[dict[str, Any]] = field(default_factory=list)
    # None: not checked (nothing exported, or no worker to ask); else whether the worker at
    # ``worker`` could read every exported span before the command returned
    readable: bool | None = None
    worker: str = ""

    @property
    def installed(self) -> bool:
        return bool(self.processes)

    @property
    def trace_ids(self) -> list[str]:
        """Every trace recorded, each process's root trace first."""
        ordered: dict[str, None] = {}
        for process in self.processes:
            if process.get("root_trace_id"):  # None: the root parented nothing, not exported
                ordered.setdefault(process["root_trace_id"], None)
            for trace_id in process.get("trace_ids", []):
                ordered.setdefault(trace_id, None)
        return list(ordered)

    def _summed(self, field: str) -> dict[str, int]:
        """A counter of every process's report line, summed over the run's processes."""
        totals: Counter[str] = Counter()
        for process in self.processes:
            totals.update({k: int(v) for k, v in (process.get(field) or {}).items()})
        return dict(totals)

    def calls(self) -> dict[str, int]:
        """Calls recorded across the run's processes, by kind (``llm``, ``http``)."""
        return self._summed("calls")

    def export_totals(self) -> dict[str, int]:
        return self._summed("export")

    def recorded_lines(self, shown: int = 3) -> list[str]:
        """What ``rewind record`` prints of the traces: one line per trace of a script; a
        service's requests (each its own trace) summed up in one line, a few ids and the
        command that lists them all, however many requests it served."""
        requests = sum(int(p.get("requests") or 0) for p in self.processes)
        if not requests:
            return [f"rewind: recorded trace {t}" for t in self.trace_ids]
        roots = [str(p["root_trace_id"]) for p in self.processes if p.get("root_trace_id")]
        units = [t for t in self.trace_ids if t not in roots]
        services = sorted({str(p["service"]) for p in self.processes if p.get("service")})
        ids = ", ".join(units[:shown]) + (", …" if len(units) > shown else "")
        listed = (f"; list them: rewind traces --service {services[0]}" if len(services) == 1
                  else "; list them: rewind traces")
        plural = "s" if requests != 1 else ""
        summary = (f"rewind: {requests} request{plural} recorded as {len(units)} "
                   f"trace{'s' if len(units) != 1 else ''} ({ids}){listed}")
        return [*(f"rewind: recorded trace {t}" for t in roots), summary]


def run_name(command: list[str]) -> str:
    """What the run is called: the script or module a Python command runs, else the program."""
    program = os.path.basename(command[0])
    rest = command[1:]
    if program.startswith("python"):
        if len(rest) >= 2 and rest[0] == "-m":
            return rest[1]
        if rest and rest[0] == "-c":
            return program  # not the code itself
        scripts = [a for a in rest if not a.startswith("-")]
        if scripts:
            return Path(scripts[0]).stem
    return program


def endpoint_for(endpoint: str | None, base: dict[str, str] | None = None) -> str:
    """The flag, else the standard variables, else the local ``rewind serve``."""
    base = dict(os.environ) if base is None else base
    if endpoint:
        return endpoint
    for name in _ENDPOINT_VARS:
        if base.get(name):
            return base[name]
    return local_collector_endpoint()


def endpoint_named(endpoint: str | None) -> bool:
    """Whether the flag or the standard variables name the collector (else the local one)."""
    return bool(endpoint) or any(os.environ.get(name) for name in _ENDPOINT_VARS)


@contextlib.contextmanager
def collector_here(url: str | None = None) -> Iterator[tuple[str, str]]:
    """A collector on loopback for the block, writing into the store ``url`` names (else the
    one ``rewind serve`` would open), its spool where that one's is: what is not written by
    the end stays there for the next one. Yields (its OTLP endpoint, the store's URL)."""
    from rewind.collector import start_ingest
    from rewind.collector.store.migrate import migrate
    from rewind.collector.store.server_settings import IngestOptions
    from rewind.collector.store.store import Store, redact_url, resolve_url

    resolved = resolve_url(url)
    if store_in_use(resolved):
        raise InvalidValue(f"no collector answers and the store {redact_url(resolved)} is open "
                           "in another process", hint="send the spans to that process's "
                           "collector: --endpoint, OTEL_EXPORTER_OTLP_ENDPOINT, or "
                           f"{ENV['grpc_port']} for its port")
    store = Store(resolved)
    try:
        migrate(store)
        ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0))
        try:
            yield f"http://{ingest.grpc_endpoint}", store.url
            ingest.flush(FLUSH_TIMEOUT_S)
        finally:
            ingest.stop()
    finally:
        store.close()


def collector_reachable(endpoint: str, timeout: float = 0.5) -> bool:
    parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    default_port = 443 if parts.scheme == "https" else 4317
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port),
                                      timeout=timeout):
            return True
    except OSError:
        return False


def record_settings(
    base: Mapping[str, str], report_path: str, endpoint: str, name: str, capture: str | None,
    command: Sequence[str] = (),
) -> dict[str, str | None]:
    """What the child's environment gets on top of ``base`` (None: removed) to record itself:
    among them the command it runs, as the resource's ``process.command_args``, so the run
    page offers the command that really ran (credentials in it masked: ``masked_argv``), and
    this machine's signature of it: only a command signed here replays unasked."""
    settings = RecordSettings(True, report_path, name).to_env()
    resource = base.get(RESOURCE_VAR, "")
    if command and A.PROCESS_COMMAND_ARGS not in resource:
        words = masked_argv(command, Redactor(capture_settings(environ=base).redact))
        argv = quote(json.dumps(words), safe="")  # the variable splits at commas
        signed = f"{A.COMMAND_SIGNATURE}={signature}" if (signature := sign(words)) else ""
        settings[RESOURCE_VAR] = ",".join(filter(None, (
            resource, signed, f"{A.PROCESS_COMMAND_ARGS}={argv}")))
    if not any(base.get(v) for v in _ENDPOINT_VARS) or endpoint != endpoint_for(None, dict(base)):
        settings["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        settings["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = None
    if "OTEL_SERVICE_NAME" not in base:
        settings["OTEL_SERVICE_NAME"] = name
    if capture:
        settings[ENV_CAPTURE] = capture
    return settings


def read_report(path: str) -> list[dict[str, Any]]:
    try:
        lines = Path(path).read_text("utf-8").splitlines()
    except FileNotFoundError:
        return []
    processes = []
    for line in lines:
        try:
            processes.append(json.loads(line))
        except ValueError:
            continue  # a process killed while writing its line
    return processes


def run_recorded(
    command: list[str], endpoint: str | None = None, name: str | None = None,
    capture: str | None = None, settings: Mapping[str, str | None] | None = None,
    installers: Sequence[str] = (), timeout: float | None = None, wait: bool = True,
) -> RecordOutcome:
    """Run ``command`` recorded; ``settings`` and ``installers`` add to what the child gets
    (``rewind fork`` installs itself after recording starts); killed after ``timeout`` s.
    ``wait``: until the worker the CLI reads through serves the spans (not for a collector
    of the caller's own, which it flushes itself)."""
    if not command:
        raise InvalidValue("no command to record (give it after --)")
    base = dict(os.environ)
    chosen = endpoint_for(endpoint, base)
    with tempfile.TemporaryDirectory(prefix="rewind-record-") as tmp:
        report_path = os.path.join(tmp, "report.jsonl")
        recording = record_settings(base, report_path, chosen, name or run_name(command), capture,
                                    command)
        exit_code = launch.run(command, {**recording, **(settings or {})}, installers, timeout)
        outcome = RecordOutcome(exit_code, chosen, read_report(report_path))
    if wait:
        wait_until_readable(outcome)
    return outcome


def run_recorded_here(command: list[str], url: str | None, name: str | None,
                      capture: str | None) -> tuple[RecordOutcome, str]:
    """``run_recorded`` through a collector of its own (``collector_here``), for ``rewind
    record`` when no ``rewind serve`` answers; also gives the store's URL."""
    with collector_here(url) as (endpoint, stored):
        outcome = run_recorded(command, endpoint, name, capture, wait=False)
    return outcome, stored


def wait_until_readable(outcome: RecordOutcome, timeout: float = READABLE_TIMEOUT) -> None:
    """Read your writes: the spans a run exported are acknowledged by the collector before
    they reach the store, so the trace id printed at exit could be "not found" for a moment.
    Waits (bounded) until the worker the CLI reads through (``REWIND_URL``) serves them all,
    and sets ``outcome.readable``."""
    totals = outcome.export_totals()
    exported = totals.get("exported_spans", 0)
    if not exported or totals.get("failed_spans") or not outcome.trace_ids:
        return
    waited = wait_for_worker(outcome.trace_ids, exported, timeout)
    if waited is not None:
        outcome.worker, outcome.readable = waited


def wait_for_worker(trace_ids: list[str], spans: int, timeout: float = READABLE_TIMEOUT,
                    ) -> tuple[str, bool | None] | None:
    """Waits (bounded) until the worker the CLI reads through serves ``spans`` spans of
    ``trace_ids``; (its URL, whether it does), None when no worker answers."""
    url = worker_url()
    if url is None or not worker_reachable(url):
        return None
    return url, ApiSource(url).wait_for_spans(trace_ids, spans, timeout)
