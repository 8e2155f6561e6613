"""Every environment variable an instrumented process reads, and the settings made of them: what
the exporter captures (set by ``instrument(...)`` arguments or the variables below), how much
its export queue holds, whole-process recording, and the worker it must never record.

=========================  ===========================================================  =========
variable                   meaning                                                      default
=========================  ===========================================================  =========
``REWIND_CAPTURE``         ``full``: raw exchange (``rewind.*`` bodies, for replay) and  ``full``
                           semconv content; ``content``: semconv content only, no raw
                           bodies; ``metadata``: neither (model, tokens, timing, status)
``REWIND_REDACT``          regular expressions whose matches are replaced by
                           ``[REDACTED]`` in every payload before export: a JSON array
                           of patterns, or one pattern
``REWIND_MAX_BODY_BYTES``  a request or response body larger than this is not           8 MiB
                           captured (the span says so in ``rewind.capture_error``)
``REWIND_MATCH_KEY_SALT``  in ``metadata`` mode, the secret ``rewind.match_key`` is      unset
                           keyed with (HMAC-SHA256); unset: no match key is recorded
``REWIND_HTTP``            ``off``: record LLM calls only, not the run's other HTTP      ``on``
                           calls (``rewind.kind=http`` spans)
``REWIND_HTTP_HOSTS``      comma-separated host globs: only these hosts' other HTTP      all
                           calls are recorded
``REWIND_HTTP_EXCLUDE``    comma-separated host globs never recorded                     none
``REWIND_CONTENT_AT``      ``collector``: with ``full`` capture and no redaction         ``process``
                           patterns, spans leave with the raw exchange only and the
                           Rewind collector derives the semconv content and match key
                           at intake (the same code, the same rows); ``process``: here
=========================  ===========================================================  =========

The others (``ENV_*`` below) say where the export queue stops, whether framework tools are
hooked, what ``rewind record`` asked of this process, and which trace a replayed run replays.
This module is the only one that names a ``REWIND_*`` variable on this side
(``tests/test_layout.py``); the server's are in ``rewind.collector.store.server_settings``, the
replayed child's in ``rewind.replay.play.replay_settings``.

Telemetry (OTLP exporters, the Rewind worker) is never recorded as a run's HTTP call; see
``telemetry.py``.

Why the salt: the match key is a hash of the whole request. Where the request itself is not
recorded (``metadata``), an unsalted key would let anyone who can read spans confirm a guessed
prompt by hashing it. Keyed with a secret of the deployment it still groups equal requests;
without one it is left out. ``full`` and ``content`` spans carry the request anyway, and replay
of ``full`` traces compares keys computed the same way on both sides, so they keep the plain
key.

A value that cannot be understood falls back to the most private choice (``metadata``) with a
warning: a typo must never widen what leaves the process.
"""

from __future__ import annotations

import contextlib
import enum
import fnmatch
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import InvalidValue


def _warn(message: str, *args: Any) -> None:
    """A setting that cannot be read, said in the log; logging is loaded then, not with the
    settings (the CLI and a replayed child read them at every start)."""
    import logging

    logging.getLogger("rewind.exporter").warning(message, *args)


ENV_CAPTURE = "REWIND_CAPTURE"
ENV_REDACT = "REWIND_REDACT"
ENV_MAX_BODY = "REWIND_MAX_BODY_BYTES"
ENV_MATCH_KEY_SALT = "REWIND_MATCH_KEY_SALT"
ENV_HTTP = "REWIND_HTTP"
ENV_HTTP_HOSTS = "REWIND_HTTP_HOSTS"
ENV_HTTP_EXCLUDE = "REWIND_HTTP_EXCLUDE"
ENV_CONTENT_AT = "REWIND_CONTENT_AT"
CONTENT_AT = ("process", "collector")
# off: framework tools (agents, LangChain, pydantic-ai, MCP) are neither recorded nor answered
ENV_FRAMEWORK_TOOLS = "REWIND_FRAMEWORK_TOOLS"
ENV_MAX_QUEUE_BYTES = "REWIND_MAX_QUEUE_BYTES"  # payload bytes queued or in flight
ENV_MAX_EXPORT_BYTES = "REWIND_MAX_EXPORT_BYTES"  # payload bytes per export request
ENV_RECORD = "REWIND_RECORD"  # 1: instrument at start-up, one root span (``rewind record``)
ENV_RECORD_REPORT = "REWIND_RECORD_REPORT"  # file the process appends its trace ids to
ENV_RECORD_NAME = "REWIND_RECORD_NAME"  # the root span's agent name
ENV_PROCESS_ROOT = "REWIND_PROCESS_ROOT"  # off: RewindInstrumentor opens no root span
ENV_REPLAY_SOURCE = "REWIND_REPLAY_SOURCE_TRACE_ID"  # a replayed run: the trace it replays
ENV_WORKER_URL = "REWIND_URL"  # the worker the CLI reads through; never recorded here
# off: inbound requests of web frameworks (ASGI, WSGI) are not hooked (servers/)
ENV_SERVERS = "REWIND_SERVERS"
ENV_GRPC = "REWIND_GRPC"  # off: gRPC channels are neither recorded nor answered (rpc/)
# What a parent (``rewind record``, ``rewind replay``) sets for its child, never set by hand:
# not in the configuration table (docs/configuration.md).
INTERNAL = frozenset({ENV_RECORD, ENV_RECORD_REPORT, ENV_RECORD_NAME, ENV_REPLAY_SOURCE})
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024



def is_off(value: str | None) -> bool:
    """A switch variable turned off: ``0``, ``off``, ``false`` or ``no`` (any case)."""
    return (value or "").strip().lower() in ("0", "off", "false", "no")


# Where this process's own telemetry goes: the OTLP endpoints and the worker, never recorded.
_TELEMETRY_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                        ENV_WORKER_URL)


def telemetry_endpoints() -> tuple[str, ...]:
    """The values of the variables naming where telemetry goes ('' for those unset)."""
    return tuple(os.environ.get(name, "") for name in _TELEMETRY_VARIABLES)


def framework_tools_enabled() -> bool:
    """Whether framework tools are hooked (``REWIND_FRAMEWORK_TOOLS``, on unless turned off)."""
    return not is_off(os.environ.get(ENV_FRAMEWORK_TOOLS))


def servers_enabled() -> bool:
    """Whether web frameworks' requests are hooked (``REWIND_SERVERS``, on unless turned off)."""
    return not is_off(os.environ.get(ENV_SERVERS))


def grpc_enabled() -> bool:
    """Whether gRPC channels are hooked (``REWIND_GRPC``, on unless turned off)."""
    return not is_off(os.environ.get(ENV_GRPC))


def process_root_enabled() -> bool:
    """Whether ``RewindInstrumentor`` opens a root span (``REWIND_PROCESS_ROOT``, on unless
    turned off)."""
    return not is_off(os.environ.get(ENV_PROCESS_ROOT))


def replay_source() -> str | None:
    """The trace a replayed run replays (spans are stamped with it), None outside a replay."""
    return os.environ.get(ENV_REPLAY_SOURCE) or None


@contextlib.contextmanager
def replaying_from(source: str) -> Iterator[None]:
    """For the block, this process replays ``source`` (what a replayed child is told by its
    environment): ``instrument()`` called inside stamps its spans with it."""
    before = os.environ.get(ENV_REPLAY_SOURCE)
    os.environ[ENV_REPLAY_SOURCE] = source
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV_REPLAY_SOURCE, None)
        else:
            os.environ[ENV_REPLAY_SOURCE] = before


def positive_int(name: str, default: int) -> int:
    """An integer variable (``name``), ``default`` when unset, not a number or not positive."""
    try:
        value = int(os.environ.get(name, "") or default)
    except ValueError:
        _warn("rewind: %s is not an integer; using %d", name, default)
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class RecordSettings:
    """What ``rewind record`` asked of this process through its environment."""

    record: bool = False
    report_path: str | None = None
    name: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RecordSettings:
        env = os.environ if environ is None else environ
        return cls(env.get(ENV_RECORD, "").strip().lower() in ("1", "true", "yes"),
                   env.get(ENV_RECORD_REPORT) or None, env.get(ENV_RECORD_NAME) or None)

    def to_env(self) -> dict[str, str | None]:
        """The child's variables (None: removed from its environment)."""
        return {ENV_RECORD: "1" if self.record else None, ENV_RECORD_REPORT: self.report_path,
                ENV_RECORD_NAME: self.name}

class CaptureMode(str, enum.Enum):
    FULL = "full"
    CONTENT = "content"
    METADATA = "metadata"


@dataclass(frozen=True)
class CaptureSettings:
    mode: CaptureMode = CaptureMode.FULL
    redact: tuple[re.Pattern[str], ...] = field(default=())
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    match_key_salt: bytes | None = field(default=None, repr=False)  # a secret: never printed
    http: bool = True  # record the run's other HTTP calls too
    http_hosts: tuple[str, ...] = ()  # host globs recorded (empty: all)
    http_exclude: tuple[str, ...] = ()  # host globs never recorded
    content_at: str = "process"  # where the semconv content is derived (``CONTENT_AT``)

    def records_http(self, host: str) -> bool:
        """Whether a non-LLM request to ``host`` is recorded (telemetry aside)."""
        if not self.http or host_matches(host, self.http_exclude):
            return False
        return not self.http_hosts or host_matches(host, self.http_hosts)

    @property
    def keeps_raw(self) -> bool:
        return self.mode is CaptureMode.FULL

    @property
    def derives_in_collector(self) -> bool:
        """Content left to the collector: only from a full exchange, and never with redaction
        patterns (they are this process's; the collector does not know them)."""
        return self.content_at == "collector" and self.keeps_raw and not self.redact

    @property
    def keeps_content(self) -> bool:
        return self.mode is not CaptureMode.METADATA

    def allowed(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """The attributes this mode lets out; without content, the match key only keyed with
        the salt (see the module's docstring)."""
        dropped = set()
        if not self.keeps_raw:
            dropped |= A.RAW_ATTRIBUTES
        if not self.keeps_content:
            dropped |= A.CONTENT_ATTRIBUTES | {A.MATCH_KEY, A.MATCH_KEY_VERSION}
        if not dropped:
            return attrs if isinstance(attrs, dict) else dict(attrs)
        out = {k: v for k, v in attrs.items() if k not in dropped}
        key = attrs.get(A.MATCH_KEY)
        if not self.keeps_content and self.match_key_salt and key:
            from rewind.exporter.core.canonical import salted_match_key  # a salt is rare

            out[A.MATCH_KEY] = salted_match_key(str(key), self.match_key_salt)
            if A.MATCH_KEY_VERSION in attrs:  # the salted key still says its rules
                out[A.MATCH_KEY_VERSION] = attrs[A.MATCH_KEY_VERSION]
        return out


def compile_patterns(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as error:
            message = f"redaction pattern {pattern!r} is not a valid regex: {error}"
            raise InvalidValue(message) from None
    return tuple(compiled)


def _env_patterns(raw: str) -> list[str]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return [raw]
    if isinstance(parsed, list) and all(isinstance(p, str) for p in parsed):
        return parsed
    return [raw]


def settings(
    mode: str | CaptureMode | None = None,
    redact: Iterable[str] | None = None,
    max_body_bytes: int | None = None,
    environ: Mapping[str, str] | None = None,
    match_key_salt: str | bytes | None = None,
    content_at: str | None = None,
) -> CaptureSettings:
    """Explicit arguments win and raise ``ValueError`` when wrong; the environment fills the
    rest, falling back to ``metadata`` when it cannot be read."""
    env = os.environ if environ is None else environ
    private = False
    if mode is not None:
        try:
            chosen = CaptureMode(mode)
        except ValueError:
            choices = ", ".join(m.value for m in CaptureMode)
            raise InvalidValue(f"capture mode must be one of {choices}, not {mode!r}") from None
    else:
        raw = env.get(ENV_CAPTURE, "").strip().lower() or CaptureMode.FULL.value
        try:
            chosen = CaptureMode(raw)
        except ValueError:
            _warn("rewind: %s=%r is not full/content/metadata; capturing metadata only",
                        ENV_CAPTURE, raw)
            chosen, private = CaptureMode.METADATA, True
    if redact is not None:
        patterns = compile_patterns(redact)
    else:
        try:
            raw_patterns = env.get(ENV_REDACT, "").strip()
            patterns = compile_patterns(_env_patterns(raw_patterns)) if raw_patterns else ()
        except ValueError as error:
            _warn("rewind: %s: %s; capturing metadata only", ENV_REDACT, error)
            patterns, private = (), True
    if max_body_bytes is None:
        try:
            max_body_bytes = int(env.get(ENV_MAX_BODY, "") or DEFAULT_MAX_BODY_BYTES)
        except ValueError:
            _warn("rewind: %s is not an integer; using %d", ENV_MAX_BODY,
                        DEFAULT_MAX_BODY_BYTES)
            max_body_bytes = DEFAULT_MAX_BODY_BYTES
    if max_body_bytes <= 0:
        raise InvalidValue(f"max_body_bytes must be positive, not {max_body_bytes}")
    if match_key_salt is None:
        match_key_salt = env.get(ENV_MATCH_KEY_SALT) or None
    if isinstance(match_key_salt, str):
        match_key_salt = match_key_salt.encode("utf-8")
    return CaptureSettings(CaptureMode.METADATA if private else chosen, patterns, max_body_bytes,
                           match_key_salt or None,
                           http=not is_off(env.get(ENV_HTTP)),
                           http_hosts=host_globs(env.get(ENV_HTTP_HOSTS, "")),
                           http_exclude=host_globs(env.get(ENV_HTTP_EXCLUDE, "")),
                           content_at=_content_at(content_at, env))


def _content_at(given: str | None, env: Mapping[str, str]) -> str:
    if given is not None:
        if given not in CONTENT_AT:
            raise InvalidValue(f"content_at must be one of {', '.join(CONTENT_AT)}, not "
                               f"{given!r}")
        return given
    raw = env.get(ENV_CONTENT_AT, "").strip().lower() or "process"
    if raw not in CONTENT_AT:
        _warn("rewind: %s=%r is not process/collector; deriving content here",
                    ENV_CONTENT_AT, raw)
        return "process"
    return raw


def host_matches(host: str, globs: Iterable[str]) -> bool:
    """Whether ``host`` matches one of ``globs`` (host names compare in any case)."""
    host = host.lower()
    return any(fnmatch.fnmatch(host, glob.lower()) for glob in globs)


def host_globs(raw: str) -> tuple[str, ...]:
    """``"api.example.com, *.internal"`` -> the globs, lower case."""
    return tuple(g.strip().lower() for g in raw.split(",") if g.strip())
