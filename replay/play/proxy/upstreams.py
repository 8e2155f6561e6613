"""Where each of the proxy's endpoints leads: one path prefix per provider, the base-URL variable
its SDKs read, and the upstream the variable named before the proxy took it over.

A program is handed ``OPENAI_BASE_URL=http://127.0.0.1:PORT/openai/v1`` when the variable was
``https://api.openai.com/v1`` (or unset: the provider's default), so the path it sends after the
prefix is the very path the upstream is sent: ``/openai/v1/chat/completions`` goes to
``https://api.openai.com/v1/chat/completions``. An OpenAI-compatible server (vLLM, Ollama, a
LiteLLM proxy) is the OpenAI endpoint with the variable pointing at it, or an endpoint of its
own named on the command line (``--upstream ollama=http://127.0.0.1:11434/v1``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from rewind.exporter.core.errors import InvalidValue
from rewind.exporter.core.redaction import clean_url


@dataclass(frozen=True)
class Provider:
    """One provider's endpoint: its prefix, the variable its SDKs read, their default."""

    name: str
    variable: str
    default: str


PROVIDERS = (
    Provider("openai", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    Provider("anthropic", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    Provider("gemini", "GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com"),
)
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


def _checked_base(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidValue(f"the upstream of {name} is {url!r}, not an http(s) URL",
                           hint="give it as NAME=https://host/path with --upstream")
    return url.rstrip("/")


@dataclass(frozen=True)
class Upstreams:
    """Prefix -> the upstream's base URL (credentials in it are sent, never stored)."""

    bases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str], extra: Mapping[str, str] | None = None,
                 own: str = "") -> Upstreams:
        """Each provider's variable in ``env`` (else its default), then ``extra`` (the
        command line's ``NAME=URL``); a variable already pointing at this proxy (``own``, its
        URL) is taken as unset."""
        bases = {}
        for provider in PROVIDERS:
            given = (env.get(provider.variable) or "").strip()
            if not given or (own and given.startswith(own)):
                given = provider.default
            bases[provider.name] = _checked_base(provider.variable, given)
        for name, url in (extra or {}).items():
            if not _NAME.fullmatch(name):
                raise InvalidValue(f"--upstream {name}=…: a name is lower-case letters, digits, "
                                   "'-' and '_'", hint="--upstream ollama=http://host:11434/v1")
            bases[name] = _checked_base(name, url)
        return cls(bases)

    def recorded(self) -> dict[str, str]:
        """What a recording keeps of them: each URL without credentials."""
        return {name: clean_url(url) for name, url in self.bases.items()}

    def child_env(self, proxy_url: str) -> dict[str, str]:
        """The base-URL variables a command gets: each provider's endpoint on the proxy, with
        the upstream's own base path, so SDKs send the paths the upstream expects."""
        return {provider.variable: self.endpoint(proxy_url, provider.name)
                for provider in PROVIDERS if provider.name in self.bases}

    def endpoint(self, proxy_url: str, name: str) -> str:
        return f"{proxy_url.rstrip('/')}/{name}{urlsplit(self.bases[name]).path}"

    def target(self, path: str, query: str = "") -> tuple[str, str] | None:
        """(prefix, upstream URL) of a request the proxy received for ``path``; None when no
        endpoint has that prefix."""
        name, _, rest = path.lstrip("/").partition("/")
        base = self.bases.get(name)
        if base is None:
            return None
        parts = urlsplit(base)
        url = f"{parts.scheme}://{parts.netloc}/{rest}"
        return name, f"{url}?{query}" if query else url


def parse_extra(given: tuple[str, ...]) -> dict[str, str]:
    """``--upstream NAME=URL`` values, by name."""
    extra = {}
    for item in given:
        name, sep, url = item.partition("=")
        if not sep or not url:
            raise InvalidValue(f"--upstream {item!r} is not NAME=URL",
                               hint="--upstream ollama=http://127.0.0.1:11434/v1")
        extra[name.strip().lower()] = url.strip()
    return extra
