"""Bearer-token authentication for both receivers, with an optional token -> tenant mapping.

The tenant of a token is stamped on every span it sends (resource attribute ``rewind.tenant``),
overriding whatever the client put there, so the worker can scope reads by tenant.

Tokens from a file are reloaded when the file changes (a rotated Kubernetes secret, an edit) or
on SIGHUP, without a restart; a file that cannot be read or parsed leaves the tokens in force,
so a typo never locks every sender out.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from rewind.collector.access.auth_backoff import AuthBackoff
from rewind.collector.store.server_settings import ENV, auth_backoff_s
from rewind.exporter.core.errors import InvalidValue, RewindError

log = logging.getLogger("rewind.collector.access.auth")


class AuthError(RewindError):
    """Missing or unknown credentials; the message says which, never the token itself."""

    http_status = 401


def parse_tokens(text: str, source: str = "tokens") -> dict[str, str | None]:
    """One entry per line (or comma-separated): ``token`` or ``token tenant``; ``#`` comments."""
    tokens: dict[str, str | None] = {}
    for number, raw in enumerate(text.replace(",", "\n").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) > 2:
            raise InvalidValue(f"{source}, entry {number}: expected 'token' or 'token tenant', "
                               f"got {len(fields)} fields")
        tokens[fields[0]] = fields[1] if len(fields) == 2 else None
    return tokens


def load_tokens(file: str | Path | None = None, inline: str | None = None) -> dict[str, str | None]:
    tokens: dict[str, str | None] = {}
    if file:
        path = Path(file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise InvalidValue(f"cannot read auth tokens file {path}: {error}") from error
        tokens.update(parse_tokens(text, str(path)))
        if not tokens:
            raise InvalidValue(f"auth tokens file {path} holds no token")
    if inline:
        tokens.update(parse_tokens(inline, ENV["auth_tokens"]))
    return tokens


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class Authenticator:
    """Checks ``Authorization: Bearer <token>``; returns the token's tenant (or None). Wrong
    tokens from one client address or with one prefix back off (:mod:`.auth_backoff`)."""

    def __init__(self, tokens: dict[str, str | None],
                 backoff: AuthBackoff | None = None) -> None:
        self.backoff = backoff if backoff is not None else AuthBackoff(base_s=auth_backoff_s())
        self.replace(tokens)

    def replace(self, tokens: dict[str, str | None]) -> None:
        """New tokens for every request from now on (one assignment: no request sees half)."""
        # Keyed by digest so the lookup does not compare secrets byte by byte.
        self._tenants = {_digest(token): tenant for token, tenant in tokens.items()}

    def __len__(self) -> int:
        return len(self._tenants)

    def check(self, authorization: str | None, client: str | None = None) -> str | None:
        """``client``: the caller's address, for the back-off (:class:`TooManyFailures`)."""
        if not authorization:
            raise AuthError("missing Authorization header (expected 'Bearer <token>')")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError("Authorization header must be 'Bearer <token>'")
        self.backoff.check_open(client, token)
        digest = _digest(token)
        found = False
        tenant = None
        for known, known_tenant in self._tenants.items():  # every one compared, in equal time
            if hmac.compare_digest(known, digest):
                found, tenant = True, known_tenant
        if not found:
            self.backoff.failed(client, token)
            raise AuthError("unknown bearer token")
        self.backoff.succeeded(client, token)
        return tenant


def header(pairs: Iterable[tuple[str, str | bytes]], name: str = "authorization") -> str | None:
    for key, value in pairs:
        if key.lower() == name:
            return value.decode("latin-1") if isinstance(value, bytes) else value
    return None


class TokenSource:
    """Where the tokens come from: a file (reloadable) and/or inline entries (fixed)."""

    def __init__(self, file: str | Path | None = None, inline: str | None = None) -> None:
        self.file = Path(file) if file else None
        self.inline = inline
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int, int, int] | None:
        if self.file is None:
            return None
        try:
            stat = os.stat(self.file)  # follows links: a swapped secret changes the target
        except OSError:
            return None
        # ctime too: a permission fix (chmod/chown) of an unreadable file is a change.
        return stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size

    def load(self) -> dict[str, str | None]:
        return load_tokens(self.file, self.inline)

    def changed(self) -> bool:
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return False
        self._seen = stamp
        return True


class TokenReloader:
    """Keeps an ``Authenticator`` in step with its ``TokenSource``: polls the file every
    ``interval_s`` and reloads at once on ``reload()`` (SIGHUP)."""

    def __init__(self, auth: Authenticator, source: TokenSource, interval_s: float = 2.0,
                 on_reload: Callable[[bool], None] | None = None) -> None:
        self.auth = auth
        self.source = source
        self.interval_s = interval_s
        self.on_reload = on_reload
        self._stop = threading.Event()
        self._reloading = threading.Lock()  # a SIGHUP and a poll: one after the other
        self._thread = threading.Thread(target=self._run, name="rewind-token-reload",
                                        daemon=True)

    def start(self) -> None:
        if self.source.file is not None and self.interval_s > 0:
            self._thread.start()

    def reload(self) -> bool:
        """Loads the tokens again; True when they were replaced, False when the old ones stay
        (the file is unreadable, malformed or empty: logged)."""
        with self._reloading:
            try:
                tokens = self.source.load()
                if not tokens:
                    raise InvalidValue("no token left")
            except InvalidValue as error:
                log.error("auth tokens not reloaded, the previous ones stay in force: %s",
                          error)
                self._report(False)
                return False
            self.auth.replace(tokens)
        log.info("auth tokens reloaded from %s: %d token(s)", self.source.file, len(tokens))
        self._report(True)
        return True

    def _report(self, ok: bool) -> None:
        if self.on_reload is not None:
            self.on_reload(ok)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self.source.changed():
                self.reload()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
