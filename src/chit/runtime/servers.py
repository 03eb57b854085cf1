"""Reaching servers: name → task-client spec (the registry), a connected client, typed errors."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from chit.errors import ChitError, NotFound
from chit.home import Home
from chit.reconcile import ConnectionPool, HandleBook, SpecResolver
from chit.reconcile.sweep import sweep_existing
from chit.runtime.server_logs import open_server_log
from chit.servers import Registry
from chit.servers.tools import ServerProtocolError, ServerUnreachable
from chit.store import Store
from chit.store.errors import StoreError
from chit.tasks.client import HttpServer, ServerSpec, StdioServer, TaskClient, TaskError
from chit.vault import Vault

log = logging.getLogger("chit.runtime")


def registry_resolver(
    home: Home, vault: Vault, environ: Mapping[str, str] | None = None
) -> SpecResolver:
    """Resolve names with the home's registry, opening sealed secrets with ``vault``."""
    registry = Registry(home.config_path, lambda: vault)

    def resolve(name: str) -> ServerSpec:
        resolved = registry.resolve(name, environ)
        declare = registry.get(name).declare  # sampling / roots: chit proxy's inbox
        if resolved.transport == "http":
            assert resolved.url is not None
            return HttpServer(resolved.url, headers=dict(resolved.headers), declare=declare)
        assert resolved.command is not None
        return StdioServer(
            resolved.command,
            list(resolved.args),
            env=dict(resolved.env) if resolved.env else None,
            cwd=resolved.cwd,
            label=name,
            declare=declare,
            # Its stderr is its own business: to logs/servers/NAME.log, never a terminal.
            stderr=open_server_log(home, name),
        )

    return resolve


async def connect(pool: ConnectionPool, server: str) -> TaskClient:
    """The connected client of ``server``.

    Raises:
        NotFound: no server of that name is registered (exit 3: a typo, not an outage).
        ServerUnreachable: no connection (exit 6), also while the reconnect backs off.
    """
    try:
        return await pool.get(server)
    except TaskError as exc:
        if isinstance(exc.__cause__, NotFound):
            raise NotFound(
                f"no server named {server!r} is registered (see chit servers list)"
            ) from None
        raise ServerUnreachable(f"cannot reach server {server!r}: {exc.message}") from exc


def typed_error(exc: TaskError, what: str) -> Exception:
    """A server's refusal as the CLI's error: transient → unreachable, else protocol."""
    if exc.failure_class == "transient":
        return ServerUnreachable(f"{what}: {exc}")
    return ServerProtocolError(f"{what}: {exc}")


def redact_older_rows(home: Home, store: Store, handles: HandleBook, resolve: SpecResolver) -> None:
    """Run the one-time redaction sweep if the store needs it (``chit.reconcile.sweep``).

    The registered servers are resolved first, so their sealed secrets are known to the
    sweep too (a server that cannot be resolved now is skipped; its handles still are
    redacted). A store error postpones the sweep to the next start.
    """
    if not store.rewriter.pending():
        return
    try:
        names = list(Registry(home.config_path, lambda: handles.vault).servers())
    except ChitError:
        names = []
    for name in names:
        try:
            resolve(name)
        except Exception as exc:  # an unresolvable server: its secrets were never opened
            log.info("redaction sweep: server %r not resolved (%s)", name, type(exc).__name__)
    try:
        sweep_existing(store, handles)
    except StoreError as exc:
        log.warning("redaction sweep postponed: %s", exc.message)
