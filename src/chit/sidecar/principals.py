"""Bearer-token principals of the HTTP sidecar.

Decision: tokens are stored as a **SHA-256 hash**, not sealed in the vault. A token is
256 random bits, so its hash cannot be reversed or guessed; verifying needs no data key,
so the HTTP sidecar authenticates callers even while the vault is locked (which is
exactly when the account guard keeps their intents waiting). The token is printed once
by ``chit sidecar token add NAME`` and never stored in clear.

The principal is the token's *name*: rotating a token (``--replace``) keeps the records.
stdio (and ``--http --no-auth``) has one implicit principal, :data:`LOCAL_PRINCIPAL`.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import anyio
from mcp.server.auth.provider import AccessToken

from chit import clock
from chit.errors import Conflict, NotFound, UsageError
from chit.inputs import check_name
from chit.sidecar.sql import SidecarDb, fetch_all, fetch_one, immediate, open_database, write
from chit.store import StoreError

log = logging.getLogger(__name__)

LOCAL_PRINCIPAL = "local"
TOKEN_PREFIX = "chit_sc_"
LAST_USED_RESOLUTION_S = 60.0
"""``last_used_at`` is written at most this often per token (a write per request is waste)."""


def token_hash(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def principal_for(name: str) -> str:
    """The principal records of token ``name`` are bound to."""
    return f"token:{name}"


@dataclass(frozen=True)
class TokenInfo:
    """A configured token (never its value)."""

    name: str
    created_at: str
    last_used_at: str | None


def add_token(db: SidecarDb, name: str, *, replace: bool = False) -> str:
    """Create (or with ``replace`` rotate) the token of ``name``; return it (shown once).

    Raises:
        UsageError: the name is not 1-64 of ``A-Z a-z 0-9 . _ -``.
        Conflict: the name exists and ``replace`` is False.
    """
    if name == LOCAL_PRINCIPAL:
        raise UsageError(f"invalid token name {name!r}: it is reserved for the stdio principal")
    check_name(name, "token")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with immediate(db):
        exists = fetch_one(db, "SELECT 1 FROM principals WHERE name = ?", [name]) is not None
        if exists and not replace:
            raise Conflict(f"a token named {name!r} exists (use --replace to rotate it)")
        write(
            db,
            "INSERT INTO principals (name, token_hash, created_at) VALUES (?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET token_hash = excluded.token_hash,"
            " created_at = excluded.created_at, last_used_at = NULL",
            [name, token_hash(token), clock.iso()],
        )
    return token


def remove_token(db: SidecarDb, name: str) -> None:
    """Delete a token (its records stay, bound to the name).

    Raises:
        NotFound: no token of that name.
    """
    with immediate(db):
        if write(db, "DELETE FROM principals WHERE name = ?", [name]).rowcount == 0:
            raise NotFound(f"no token named {name!r}")


def list_tokens(db: SidecarDb) -> list[TokenInfo]:
    """Configured tokens, by name."""
    rows = fetch_all(db, "SELECT name, created_at, last_used_at FROM principals ORDER BY name")
    return [TokenInfo(r["name"], r["created_at"], r["last_used_at"]) for r in rows]


def lookup(db: SidecarDb, token: str) -> str | None:
    """Return the name of the token, or None."""
    row = fetch_one(db, "SELECT name FROM principals WHERE token_hash = ?", [token_hash(token)])
    return str(row["name"]) if row is not None else None


def authenticate(db: SidecarDb, token: str) -> str | None:
    """Return the name of the token and record that it was used now; None if unknown.

    ``last_used_at`` (shown by ``chit sidecar token list``) is refreshed at most once per
    :data:`LAST_USED_RESOLUTION_S`, so a busy agent does not cost a write per request.
    """
    digest = token_hash(token)
    row = fetch_one(db, "SELECT name, last_used_at FROM principals WHERE token_hash = ?", [digest])
    if row is None:
        return None
    now = clock.now()
    last = row["last_used_at"]
    stale_before = clock.iso(now - timedelta(seconds=LAST_USED_RESOLUTION_S))
    if last is None or str(last) < stale_before:
        try:
            with immediate(db):
                write(
                    db,
                    "UPDATE principals SET last_used_at = ? WHERE token_hash = ?",
                    [clock.iso(now), digest],
                )
        except StoreError as exc:  # bookkeeping only: never refuse a valid token for it
            log.warning("could not record the use of token %r: %s", str(row["name"]), exc)
    return str(row["name"])


class SidecarTokenVerifier:
    """The MCP SDK ``TokenVerifier`` over the ``principals`` table.

    Args:
        path: The sidecar store: a file, or a ``postgresql://`` URL.
    """

    def __init__(self, path: Path | str) -> None:
        self._path = path

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return an ``AccessToken`` whose ``client_id`` is the token's name, or None."""

        def find() -> str | None:
            db = open_database(self._path)
            try:
                return authenticate(db, token)
            finally:
                db.close()

        name = await anyio.to_thread.run_sync(find)
        if name is None:
            return None
        return AccessToken(token=token, client_id=name, scopes=[], subject=name)


def current_principal() -> str:
    """The principal of the request being handled: the token's name, else local."""
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token
    except ImportError:  # pragma: no cover - auth extras missing
        return LOCAL_PRINCIPAL
    access = get_access_token()
    if access is None:
        return LOCAL_PRINCIPAL
    return principal_for(access.client_id)
