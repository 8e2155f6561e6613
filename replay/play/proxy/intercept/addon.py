"""The script ``mitmdump`` runs for Rewind (``mitmdump -s addon.py``), in mitmproxy's own
interpreter: it imports nothing from Rewind, which is not installed there, and only the addon
API mitmproxy has kept from 8.x to 12.x (the ``load``, ``configure``, ``http_connect``,
``request`` and ``responseheaders`` hooks, ``loader.add_option``, ``Response.make``).

mitmdump is started with ``allow_hosts`` set to the providers' hosts, so only their TLS is
decrypted; every other host is tunnelled as bytes. A request to a provider's host is sent, as
plain HTTP on loopback, to Rewind's base-URL proxy, under the path prefix of that provider's
endpoint (``https://api.openai.com/v1/chat/completions`` becomes
``http://127.0.0.1:PORT/openai/v1/chat/completions``), method, headers and body unchanged; the
answer streams back as it arrives. With ``rewind_refuse`` (a strict replay) any other host is
refused: the recording holds nothing for it and nothing may leave.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

TARGET = "rewind_target"  # http://127.0.0.1:PORT of Rewind's proxy
ROUTES = "rewind_routes"  # host=endpoint,host=endpoint
REFUSE = "rewind_refuse"  # refuse hosts not in the routes


def parse_routes(value: str) -> dict[str, str]:
    """``host=endpoint,...`` as {host: endpoint}, hosts in lower case."""
    routes = {}
    for item in value.split(","):
        host, _, name = item.strip().partition("=")
        if host and name:
            routes[host.lower()] = name
    return routes


class Intercept:
    """Routes the providers' requests to Rewind's proxy and streams the answers back."""

    def __init__(self) -> None:
        self.host = "127.0.0.1"
        self.port = 0
        self.routes: dict[str, str] = {}
        self.refuse = False

    def load(self, loader: Any) -> None:
        loader.add_option(TARGET, str, "", "Rewind's proxy: http://127.0.0.1:PORT")
        loader.add_option(ROUTES, str, "", "host=endpoint,...: hosts sent to Rewind's proxy")
        loader.add_option(REFUSE, bool, False, "Refuse every other host (a strict replay)")

    def configure(self, updated: Any) -> None:
        from mitmproxy import ctx

        target = urlsplit(getattr(ctx.options, TARGET))
        self.host, self.port = target.hostname or "127.0.0.1", target.port or 80
        self.routes = parse_routes(getattr(ctx.options, ROUTES))
        self.refuse = bool(getattr(ctx.options, REFUSE))

    def http_connect(self, flow: Any) -> None:
        """A tunnel to a host the recording cannot answer for is refused in a strict replay
        (before anything connects out)."""
        if self.refuse and flow.request.host.lower() not in self.routes:
            flow.response = _refusal(flow.request.host)

    def request(self, flow: Any) -> None:
        name = self.routes.get(flow.request.host.lower())
        if name is None:
            if self.refuse:
                flow.response = _refusal(flow.request.host)
            return
        path = flow.request.path
        flow.request.scheme = "http"
        flow.request.host = self.host
        flow.request.port = self.port
        flow.request.path = f"/{name}{path if path.startswith('/') else '/' + path}"

    def responseheaders(self, flow: Any) -> None:
        flow.response.stream = True  # each event passed on as it arrives


def _refusal(host: str) -> Any:
    from mitmproxy import http

    return http.Response.make(
        403, f"rewind: {host} is not recorded in this replay; nothing leaves a strict "
             "replay (rewind-replay --allow-live HOST lets it through)\n".encode(),
        {"content-type": "text/plain", "x-should-retry": "false"})


addons = [Intercept()]
