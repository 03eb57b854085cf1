"""Server name → task-client spec, through the registry in ``config.toml``."""

from __future__ import annotations

from collections.abc import Mapping

from chit.home import Home
from chit.reconcile import SpecResolver
from chit.servers import Registry
from chit.tasks.client import HttpServer, ServerSpec, StdioServer
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
