"""The server registry: the ``[servers.NAME]`` tables of ``CHIT_HOME/config.toml``.

Every change is one locked read-modify-write that replaces the file atomically, so a
failed command (bad input, vault unavailable, disk error) leaves the old file in place.
Tables other than ``[servers]`` (``[settings]`` and anything a newer chit writes) are
carried over unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import tomlkit
from pydantic import ValidationError
from tomlkit.toml_document import TOMLDocument

from chit.errors import Conflict, NotFound
from chit.home import Home
from chit.servers import toml_io
from chit.servers.resolve import ResolvedServer, resolve
from chit.servers.secrets import SealerFactory, seal_mapping, vault_factory
from chit.servers.spec import ServerSpec
from chit.servers.toml_io import ConfigError

SERVERS = "servers"
T = TypeVar("T")


def _first_error(exc: ValidationError) -> str:
    # pydantic's full text echoes the input, which may hold a plaintext secret.
    err = exc.errors()[0]
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    loc = ".".join(str(p) for p in err.get("loc", ()))
    return f"{loc}: {msg}" if loc else msg


class Registry:
    """Loads, changes and saves the registered servers.

    Args:
        path: The config file (``Home.config_path``).
        sealer: Unlocks the vault when a secret must be sealed or opened. Tests pass a
            factory over ``MemoryKeyStore``; :meth:`for_home` uses the home's key store.
    """

    def __init__(self, path: Path, sealer: SealerFactory) -> None:
        self.path = path
        self.sealer = sealer

    @classmethod
    def for_home(
        cls,
        home: Home,
        sealer: SealerFactory | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Registry:
        """Return the registry of ``home`` (vault from ``CHIT_KEY_STORE`` unless given)."""
        return cls(home.config_path, sealer or vault_factory(home, environ))

    # -- reading ---------------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        """Return the whole parsed config file (empty when it does not exist)."""
        return toml_io.read(self.path)

    def servers(self) -> dict[str, ServerSpec]:
        """Return every registered server by name, sorted by name.

        Raises:
            ConfigError: the file, or one of its server tables, is invalid.
        """
        return _parse_servers(self.document(), self.path)

    def get(self, name: str) -> ServerSpec:
        """Return the server called ``name``.

        Raises:
            NotFound: no server has that name.
        """
        servers = self.servers()
        if name not in servers:
            known = ", ".join(servers) or "none registered"
            raise NotFound(f"no server named {name!r} (known: {known})")
        return servers[name]

    def resolve(self, name: str, environ: Mapping[str, str] | None = None) -> ResolvedServer:
        """Return the plaintext connection parameters of ``name`` (see ``resolve``).

        A stdio server is started with ``CHIT_HOME`` set to this registry's home (unless
        its own ``env`` sets it): the MCP SDK passes a child only a minimal environment,
        so a ``chit demo-server`` or ``chit sidecar`` registered over stdio would
        otherwise fall back to another home (the demo server once shared a 0644 task
        store in /tmp between every home).
        """
        resolved = resolve(self.get(name), self.sealer, environ)
        if resolved.transport != "stdio" or "CHIT_HOME" in resolved.env:
            return resolved
        return replace(resolved, env={"CHIT_HOME": str(self.path.parent), **resolved.env})

    # -- changing --------------------------------------------------------------------

    def seal(self, spec: ServerSpec, force_env: Iterable[str] = ()) -> ServerSpec:
        """Return ``spec`` with every value that must be sealed sealed (see ``must_seal``).

        The vault is unlocked only when there is something to seal.
        """
        fingerprints = dict(spec.fingerprints)
        force = frozenset(force_env)
        env = seal_mapping(self.sealer, spec.name, "env", spec.env, fingerprints, force)
        headers = seal_mapping(self.sealer, spec.name, "headers", spec.headers, fingerprints)
        # Drop fingerprints of values that are no longer there (or no longer sealed).
        live = {f"env.{k}" for k in env} | {f"headers.{k}" for k in headers}
        fingerprints = {k: v for k, v in fingerprints.items() if k in live}
        return spec.model_copy(
            update={"env": env, "headers": headers, "fingerprints": fingerprints}
        )

    def add(
        self, spec: ServerSpec, *, replace: bool = False, force_env: Iterable[str] = ()
    ) -> ServerSpec:
        """Register ``spec``, sealing its secrets first; return the stored spec.

        Raises:
            Conflict: a server with that name exists and ``replace`` is False.
            KeyStoreUnavailable: a secret must be sealed and the vault is unavailable.
        """
        # Seal before taking the lock: unlocking may talk to a keyring, and nothing is
        # written if it fails.
        sealed = self.seal(spec, force_env)

        def change(servers: dict[str, ServerSpec]) -> ServerSpec:
            if sealed.name in servers and not replace:
                raise Conflict(
                    f"a server named {sealed.name!r} is already registered "
                    "(remove it first, or use --replace)"
                )
            servers[sealed.name] = sealed
            return sealed

        return self.update(change)

    def remove(self, name: str) -> ServerSpec:
        """Unregister ``name`` and return what was removed.

        Raises:
            NotFound: no server has that name.
        """

        def change(servers: dict[str, ServerSpec]) -> ServerSpec:
            if name not in servers:
                raise NotFound(f"no server named {name!r}")
            return servers.pop(name)

        return self.update(change)

    def update(self, change: Callable[[dict[str, ServerSpec]], T]) -> T:
        """Apply ``change`` to the server map under the lock and save, all or nothing.

        ``change`` mutates the dict it is given; if it raises, nothing is written.
        """
        with toml_io.locked(self.path):
            plain, document = toml_io.read_for_edit(self.path)
            servers = _parse_servers(plain, self.path)
            before = dict(servers)
            result = change(servers)
            if servers == before:
                return result  # nothing changed: leave the file alone
            _write_back(document, before, servers)
            toml_io.atomic_write(self.path, toml_io.dumps(document))
        return result

    def remove_unparsable(self, name: str) -> bool:
        """Delete ``[servers.NAME]`` without validating it; True if it was there.

        The way out of a table no chit can read (an invalid name or entry written by
        hand, or by an older chit): every other command refuses the whole file.
        """
        with toml_io.locked(self.path):
            plain, document = toml_io.read_for_edit(self.path)
            table = plain.get(SERVERS)
            if not isinstance(table, dict) or name not in table:
                return False
            del document[SERVERS][name]
            toml_io.atomic_write(self.path, toml_io.dumps(document))
        return True


def _write_back(
    document: TOMLDocument, before: Mapping[str, ServerSpec], after: Mapping[str, ServerSpec]
) -> None:
    """Apply the change to the editable document: only the server tables that changed.

    Comments and layout elsewhere in the file, and in untouched server tables, survive.
    """
    if SERVERS not in document:
        document[SERVERS] = tomlkit.table(is_super_table=True)
    table: Any = document[SERVERS]  # a table, or an inline table written by hand
    for name in [n for n in before if n not in after]:
        del table[name]
    for name, spec in after.items():
        if before.get(name) != spec:
            table[name] = spec.to_toml()


def _parse_servers(document: Mapping[str, Any], path: Path) -> dict[str, ServerSpec]:
    table = document.get(SERVERS, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [servers] must be a table")
    out: dict[str, ServerSpec] = {}
    for name in sorted(table):
        if not isinstance(table[name], dict):
            raise ConfigError(f"{path}: [servers.{name}] must be a table")
        try:
            out[name] = ServerSpec.from_toml(name, table[name])
        except ValidationError as exc:
            raise ConfigError(f"{path}: [servers.{name}] is invalid: {_first_error(exc)}") from None
    return out


__all__ = ["ConfigError", "Registry"]
