"""Bearer-token authentication for both receivers, with an optional token -> tenant mapping.

The tenant of a token is stamped on every span it sends (resource attribute ``rewind.tenant``),
overriding whatever the client put there, so the worker can scope reads by tenant.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from pathlib import Path

TENANT_ATTRIBUTE = "rewind.tenant"


class AuthError(Exception):
    """Missing or unknown credentials; the message says which, never the token itself."""


def parse_tokens(text: str, source: str = "tokens") -> dict[str, str | None]:
    """One entry per line (or comma-separated): ``token`` or ``token tenant``; ``#`` comments."""
    tokens: dict[str, str | None] = {}
    for number, raw in enumerate(text.replace(",", "\n").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) > 2:
            raise ValueError(f"{source}, entry {number}: expected 'token' or 'token tenant', "
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
            raise ValueError(f"cannot read auth tokens file {path}: {error}") from error
        tokens.update(parse_tokens(text, str(path)))
        if not tokens:
            raise ValueError(f"auth tokens file {path} holds no token")
    if inline:
        tokens.update(parse_tokens(inline, "REWIND_AUTH_TOKENS"))
    return tokens


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class Authenticator:
    """Checks ``Authorization: Bearer <token>``; returns the token's tenant (or None)."""

    def __init__(self, tokens: dict[str, str | None]) -> None:
        # Keyed by digest so the lookup does not compare secrets byte by byte.
        self._tenants = {_digest(token): tenant for token, tenant in tokens.items()}

    def __len__(self) -> int:
        return len(self._tenants)

    def check(self, authorization: str | None) -> str | None:
        if not authorization:
            raise AuthError("missing Authorization header (expected 'Bearer <token>')")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("Authorization header must be 'Bearer <token>'")
        digest = _digest(token.strip())
        for known, tenant in self._tenants.items():
            if hmac.compare_digest(known, digest):
                return tenant
        raise AuthError("unknown bearer token")


def header(pairs: Iterable[tuple[str, str | bytes]], name: str = "authorization") -> str | None:
    for key, value in pairs:
        if key.lower() == name:
            return value.decode("latin-1") if isinstance(value, bytes) else value
    return None
