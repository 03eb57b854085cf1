"""Reaching servers: name → task-client spec (the registry), a connected client, typed errors."""

from __future__ import annotations

from collections.abc import Mapping

from chit.home import Home
from chit.reconcile import ConnectionPool, SpecResolver
from chit.servers import Registry
from chit.servers.tools import ServerProtocolError, ServerUnreachable
from chit.tasks.client import HttpServer, ServerSpec, StdioServer, TaskClient, TaskError
from chit.vault import Vault


def registry_resolver(
    home: Home, vault: Vault, environ: Mapping[str, str] | None = None
) -> SpecResolver:
    """Resolve names with the home's registry, opening sealed secrets with ``vault``."""
    registry = Registry(home.config_path, lambda: vault)

    def resolve(name: str) -> ServerSpec:
        resolved = registry.resolve(name, environ)
        if resolved.transport == "http":
            assert resolved.url is not None
            return HttpServer(resolved.url, headers=dict(resolved.headers))
        assert resolved.command is not None
        return StdioServer(
            resolved.command,
            list(resolved.args),
            env=dict(resolved.env) if resolved.env else None,
            cwd=resolved.cwd,
        )

    return resolve


async def connect(pool: ConnectionPool, server: str) -> TaskClient:
    """The connected client of ``server``.

    Raises:
        ServerUnreachable: no connection (exit 6), also while the reconnect backs off.
    """
    try:
        return await pool.get(server)
    except TaskError as exc:
        raise ServerUnreachable(f"cannot reach server {server!r}: {exc.message}") from exc


def typed_error(exc: TaskError, what: str) -> Exception:
    """A server's refusal as the CLI's error: transient → unreachable, else protocol."""
    if exc.failure_class == "transient":
        return ServerUnreachable(f"{what}: {exc}")
    return ServerProtocolError(f"{what}: {exc}")
