"""Who is asking: the principal a task is bound to.

Task ids are bearer tokens, so when the transport authenticates the caller (HTTP with
bearer auth) every task is bound to that identity and other identities cannot see it.
Without authentication (stdio, unauthenticated HTTP) the principal is the empty string
and the id alone grants access; ids carry 192 random bits for that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PrincipalOf = Callable[[Any], str]
"""``(request context) -> principal`` ("" when anonymous)."""

ANONYMOUS = ""


def default_principal(ctx: Any) -> str:
    """Return ``issuer|client_id|subject`` of the request's access token, or "" without one."""
    del ctx  # the SDK keeps the authenticated user in a contextvar, not on ctx
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token
    except ImportError:  # pragma: no cover - auth extras missing
        return ANONYMOUS
    token = get_access_token()
    if token is None:
        return ANONYMOUS
    parts = [
        str(getattr(token, "issuer", "") or ""),
        str(getattr(token, "client_id", "") or ""),
        str(getattr(token, "subject", "") or ""),
    ]
    return "|".join(parts)
