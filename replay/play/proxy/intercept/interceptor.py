"""mitmdump run for one command: a second proxy in front of Rewind's, for programs that cannot be
pointed at a base URL (a Go binary with ``api.openai.com`` built in).

The command gets ``HTTPS_PROXY`` (and ``HTTP_PROXY``) pointing at mitmdump on loopback and
trusts the local CA through a bundle (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``,
``CURL_CA_BUNDLE``; ``NODE_EXTRA_CA_CERTS``). mitmdump decrypts the TLS of the providers' hosts
only (``allow_hosts``) and :mod:`.addon` sends each of their requests to the endpoint of Rewind's
proxy for that host, which records or replays it as it does any base-URL call. mitmdump is a
separate program (mitmproxy cannot share Rewind's interpreter on every Python Rewind supports):
started by the one launcher, outside a sealed replay's namespace, reached from inside through
the relay that carries the proxy (``REWIND_INTERCEPT_URL`` is handed in). It never connects to
a provider itself (``connection_strategy=lazy``, ``upstream_cert=false``): only Rewind's proxy
does, when recording.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.play import launch
from rewind.replay.play.proxy.intercept import addon
from rewind.replay.play.proxy.intercept.authority import (
    INSTALL,
    InterceptionError,
    existing,
    mitmdump,
    mitmdump_env,
    write_bundle,
)
from rewind.replay.play.proxy.listener import LOOPBACK
from rewind.replay.play.proxy.upstreams import PROVIDERS
from rewind.replay.play.replay_settings import ENV_INTERCEPT_URL

START_TIMEOUT_S = 60.0  # mitmdump starts in about a second; more on a loaded machine
STOP_TIMEOUT_S = 5.0
# The providers' hosts, each led to its endpoint of Rewind's proxy.
PROVIDER_HOSTS = {urlsplit(p.default).hostname or "": p.name for p in PROVIDERS}
_HOST = re.compile(r"(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
                   r"(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def routes(hosts: Iterable[str] = ()) -> dict[str, str]:
    """{host: endpoint}: the providers' hosts, then ``hosts`` the user named, each an endpoint
    of its own named after it (``api.groq.com`` -> ``api-groq-com``)."""
    found = dict(PROVIDER_HOSTS)
    for given in hosts:
        host = given.strip().lower().rstrip(".")
        if not _HOST.fullmatch(host):
            raise InvalidValue(f"--intercept-host {given!r} is not a host name",
                               hint="give the host alone: --intercept-host api.groq.com")
        found.setdefault(host, host.replace(".", "-")[:40].strip("-"))
    return found


def check() -> None:
    """:class:`InterceptionError` now if mitmdump or the CA is missing."""
    mitmdump()
    existing()


def named_upstreams(chosen: Mapping[str, str]) -> dict[str, str]:
    """The endpoints of hosts the user named: each leads to its host over HTTPS."""
    return {name: f"https://{host}" for host, name in chosen.items()
            if host not in PROVIDER_HOSTS}


def hosts_pattern(hosts: Iterable[str]) -> str:
    """``allow_hosts``: exactly these hosts, with or without a port (mitmproxy 8 matches the
    host, later versions ``host:port``)."""
    return f"^(?:{'|'.join(re.escape(h) for h in sorted(hosts))})(?::\\d+)?$"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


class Interception:
    """mitmdump on a loopback port from ``with`` to its end, leading the hosts of ``chosen``
    ({host: endpoint}) to Rewind's proxy at ``proxy_url``; ``refuse``: every other host gets a
    refusal (a strict replay), else it is tunnelled untouched."""

    def __init__(self, proxy_url: str, chosen: Mapping[str, str], refuse: bool = False) -> None:
        self.program = mitmdump()
        self.authority = existing()
        self.proxy_url = proxy_url
        self.routes = dict(chosen)
        self.refuse = refuse
        self.port = 0
        self.bundle: Path | None = None
        self._child: subprocess.Popen | None = None
        self._scratch: str | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def argv(self) -> list[str]:
        options = {"confdir": str(self.authority.directory), "connection_strategy": "lazy",
                   "upstream_cert": "false", "allow_hosts": hosts_pattern(self.routes),
                   addon.TARGET: self.proxy_url,
                   addon.ROUTES: ",".join(f"{h}={n}" for h, n in self.routes.items()),
                   addon.REFUSE: "true" if self.refuse else "false"}
        sets = [word for key, value in options.items() for word in ("--set", f"{key}={value}")]
        return [self.program, "-q", "--listen-host", LOOPBACK, "--listen-port", str(self.port),
                "-s", addon.__file__, *sets]

    def start(self) -> Interception:
        self._scratch = tempfile.mkdtemp(prefix="rewind-intercept-")
        try:
            self.bundle = write_bundle(self.authority, Path(self._scratch) / "ca-bundle.pem")
            self.port = _free_port()
            self._child = launch.start(self.argv(), mitmdump_env(), stdout=subprocess.DEVNULL)
            self._wait_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_listening(self) -> None:
        assert self._child is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            code = self._child.poll()
            if code is not None:
                raise InterceptionError(f"{self.program} ended (exit code {code}) before it "
                                        "listened; its message is above",
                                        hint="check that it runs (mitmdump --version: 8 or "
                                             f"later); or {INSTALL}")
            try:
                socket.create_connection((LOOPBACK, self.port), 0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise InterceptionError(
                        f"{self.program} did not listen within {START_TIMEOUT_S:.0f} s",
                        hint="is the machine very busy? run again") from None
                time.sleep(0.02)

    def child_env(self) -> dict[str, str]:
        """The command's proxy and trust variables (loopback is reached directly)."""
        assert self.bundle is not None
        bypass = [h.strip() for v in (os.environ.get("NO_PROXY"), os.environ.get("no_proxy"))
                  for h in (v or "").split(",") if h.strip()]
        no_proxy = ",".join(dict.fromkeys([*bypass, *LOOPBACK_NAMES]))
        bundle, cert = str(self.bundle), str(self.authority.cert)
        return {"HTTPS_PROXY": self.url, "https_proxy": self.url, "HTTP_PROXY": self.url,
                "http_proxy": self.url, "NO_PROXY": no_proxy, "no_proxy": no_proxy,
                "SSL_CERT_FILE": bundle, "REQUESTS_CA_BUNDLE": bundle,
                "CURL_CA_BUNDLE": bundle, "NODE_EXTRA_CA_CERTS": cert,
                "NODE_USE_ENV_PROXY": "1",  # Node 24 and later: fetch honours HTTPS_PROXY
                ENV_INTERCEPT_URL: self.url}

    def stop(self) -> None:
        """Stop mitmdump and remove the bundle."""
        child, scratch = self._child, self._scratch
        self._child = self._scratch = None
        if child is not None:
            launch.stop(child, STOP_TIMEOUT_S)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    def __enter__(self) -> Interception:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
