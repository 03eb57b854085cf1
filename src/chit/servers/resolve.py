"""From a stored spec to plaintext connection parameters, at connect time only.

Sealed values are opened with the vault, then ``${VAR}`` and ``${VAR:-default}``
references are expanded from chit's environment - the same syntax Claude Code expands in
``.mcp.json``. References are kept verbatim in the registry (import does not expand them)
so a rotated token in the environment is picked up without re-importing.

The opened values that are secret (every header, every sealed or secret-looking env
value) are registered with ``chit.redaction.REGISTRY`` as the server's secrets: whatever
the server later echoes of them is redacted (``secret#<server>.<field>.<key>``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from chit.errors import UsageError
from chit.redaction import REGISTRY, Secret, config_secrets
from chit.servers.secrets import Sealer, SealerFactory, open_value
from chit.servers.spec import (
    ServerSpec,
    Transport,
    env_problem,
    header_problem,
    is_sealed,
    is_secret_env,
)

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def references(text: str) -> list[str]:
    """Return the variable names referenced as ``${VAR}`` in ``text``."""
    return [m.group(1) for m in _REF.finditer(text)]


def expand(text: str, environ: Mapping[str, str], *, where: str) -> str:
    """Expand ``${VAR}`` / ``${VAR:-default}`` in ``text`` from ``environ``.

    Raises:
        UsageError: a referenced variable is unset and has no default.
    """

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise UsageError(f"{where} references ${{{name}}}, which is not set")
            return default
        return value

    return _REF.sub(sub, text)


@dataclass(frozen=True)
class ResolvedServer:
    """Plaintext connection parameters; lives only as long as a connection attempt.

    ``repr`` shows the names of env variables and headers, never their values.
    """

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        target = self.url if self.transport == "http" else self.command
        return (
            f"ResolvedServer(name={self.name!r}, transport={self.transport!r}, "
            f"target={target!r}, env={sorted(self.env)!r}, headers={sorted(self.headers)!r})"
        )


def resolve(
    spec: ServerSpec, sealer: SealerFactory, environ: Mapping[str, str] | None = None
) -> ResolvedServer:
    """Open ``spec``'s sealed values and expand its ``${VAR}`` references.

    Args:
        spec: The stored spec.
        sealer: Unlocks the vault; only called when ``spec`` has sealed values.
        environ: Where references are looked up (default ``os.environ``).

    Raises:
        KeyStoreUnavailable, DataKeyMissing, HandleDecryptError: a sealed value cannot
            be opened.
        UsageError: a referenced variable is not set.
    """
    from chit.vault import HandleDecryptError

    env_vars = os.environ if environ is None else environ
    vault: Sealer | None = sealer() if spec.secret_fields() else None

    def value(field_name: str, key: str, stored: str) -> str:
        if is_sealed(stored):
            assert vault is not None  # secret_fields() was non-empty
            try:
                stored = open_value(vault, spec.name, field_name, key, stored)
            except HandleDecryptError as exc:
                # Name the value that failed; the vault's message says why.
                raise HandleDecryptError(
                    f"server {spec.name!r}: cannot open sealed {field_name}.{key}: {exc.message}"
                ) from None
        return expand(stored, env_vars, where=f"server {spec.name!r} {field_name}.{key}")

    def plain(text: str, what: str) -> str:
        return expand(text, env_vars, where=f"server {spec.name!r} {what}")

    env = {k: value("env", k, v) for k, v in spec.env.items()}
    headers = {k: value("headers", k, v) for k, v in spec.headers.items()}
    secrets: list[Secret] = []
    for key, opened in headers.items():
        secrets += config_secrets(spec.name, "headers", key, opened)
    for key, opened in env.items():
        if is_sealed(spec.env[key]) or is_secret_env(key, opened):
            secrets += config_secrets(spec.name, "env", key, opened)
    REGISTRY.remember_server(spec.name, secrets)
    # Opened and expanded values are checked again: ${VAR} may bring a line break in.
    for problem in (
        *(header_problem(k, v) for k, v in headers.items()),
        *(env_problem(k, v) for k, v in env.items()),
    ):
        if problem:
            raise UsageError(f"server {spec.name!r}: {problem}")
    return ResolvedServer(
        name=spec.name,
        transport=spec.transport,
        command=plain(spec.command, "command") if spec.command is not None else None,
        args=tuple(plain(a, "args") for a in spec.args),
        env=env,
        cwd=plain(spec.cwd, "cwd") if spec.cwd is not None else None,
        url=plain(spec.url, "url") if spec.url is not None else None,
        headers=headers,
    )
