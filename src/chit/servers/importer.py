"""Importing the ``mcpServers`` JSON of Claude Desktop, Claude Code and Cursor.

Each entry is either imported or skipped with a reason; the whole import is then written
in one atomic replace of ``config.toml``, so a failure (vault unavailable, disk error)
leaves the registry exactly as it was. See ``docs/servers.md`` for the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from chit.errors import UsageError
from chit.files import MIB, read_regular
from chit.inputs import parse_json
from chit.servers.registry import Registry
from chit.servers.resolve import references
from chit.servers.spec import ServerSpec, valid_name

_HTTP_TYPES = frozenset({"http", "streamable-http", "streamablehttp", "streamable_http"})
# Keys each host format defines that chit understands; anything else is reported as ignored.
_STDIO_KEYS = frozenset({"type", "command", "args", "env", "cwd", "envFile"})
_HTTP_KEYS = frozenset({"type", "url", "headers"})
MAX_IMPORT_BYTES = 16 * MIB
"""An ``mcpServers`` file larger than this is refused (real ones are a few KiB)."""
MAX_ENV_FILE_BYTES = 1 * MIB


@dataclass(frozen=True)
class ImportedServer:
    """A server the import registered."""

    name: str
    transport: str
    replaced: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SkippedServer:
    """A server the import left out, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class ImportReport:
    """The outcome of one ``import_mcp_servers``."""

    source: str
    imported: list[ImportedServer] = field(default_factory=list)
    skipped: list[SkippedServer] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict (``source``, ``imported``, ``skipped``)."""
        return asdict(self)


class SkipEntry(Exception):
    """This entry cannot be imported, for the reason in the message."""


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SkipEntry(f"{what} must be a list of strings")
    return list(value)


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise SkipEntry(f"{what} must be an object")
    out: dict[str, str] = {}
    for key, item in value.items():
        # Hosts accept numbers and booleans here and pass their JSON spelling on.
        if isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            out[key] = str(item)
        else:
            raise SkipEntry(f"{what}.{key} must be a string")
    return out


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a ``.env`` file: ``KEY=VALUE`` lines, ``#`` comments, optional ``export``.

    Raises:
        OSError: unreadable, not a regular file (a FIFO, ``/dev/zero``) or over 1 MiB.
        UnicodeDecodeError: not UTF-8.
    """
    out: dict[str, str] = {}
    text = read_regular(path, limit=MAX_ENV_FILE_BYTES).decode("utf-8")
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _env_file_base(source: Path) -> Path:
    # Cursor and VS Code resolve envFile against the workspace, which is the parent of
    # their .cursor/.vscode folder; elsewhere the config file's own folder.
    folder = source.parent
    return folder.parent if folder.name in {".cursor", ".vscode"} else folder


def _transport(entry: Mapping[str, Any]) -> str:
    kind = entry.get("type")
    if kind is None:
        if "command" in entry:
            return "stdio"
        if "url" in entry:
            return "http"
        raise SkipEntry("missing command (stdio) or url (http)")
    if not isinstance(kind, str):
        raise SkipEntry("type must be a string")
    normalized = kind.strip().lower()
    if normalized == "sse":
        raise SkipEntry(
            "unsupported transport sse (deprecated by MCP; chit speaks stdio and "
            "streamable http - use the server's streamable http url with type http)"
        )
    if normalized == "stdio":
        return "stdio"
    if normalized in _HTTP_TYPES:
        return "http"
    raise SkipEntry(f"unknown transport type {kind!r}")


def convert_entry(name: str, entry: Any, source: Path) -> tuple[ServerSpec, list[str]]:
    """Convert one ``mcpServers`` entry to a (not yet sealed) spec plus notes.

    Args:
        name: The entry's key (the server name).
        entry: The entry's value.
        source: The file it comes from (``envFile`` is read relative to it).

    Raises:
        SkipEntry: the entry cannot be imported; the message says why.
    """
    if not valid_name(name):
        raise SkipEntry(
            "invalid name: use 1-64 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit"
        )
    if not isinstance(entry, dict):
        raise SkipEntry("entry is not an object")
    transport = _transport(entry)
    notes: list[str] = []
    if transport == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise SkipEntry("missing command")
        env: dict[str, str] = {}
        env_file = entry.get("envFile")
        if env_file is not None:
            if not isinstance(env_file, str):
                raise SkipEntry("envFile must be a string")
            path = (_env_file_base(source) / Path(env_file).expanduser()).resolve()
            try:
                env = read_env_file(path)
            except OSError as exc:
                raise SkipEntry(
                    f"envFile {env_file} cannot be read: {exc.strerror or exc}"
                ) from None
            except UnicodeDecodeError:
                raise SkipEntry(f"envFile {env_file} cannot be read: it is not UTF-8") from None
            notes.append(f"read {len(env)} variable(s) from envFile {env_file}")
        # Explicit env wins over the file, as in Cursor.
        env |= _string_map(entry.get("env", {}), "env")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise SkipEntry("cwd must be a string")
        data: dict[str, Any] = {
            "name": name,
            "transport": "stdio",
            "command": command,
            "args": _strings(entry.get("args", []), "args"),
            "env": env,
            "cwd": cwd,
        }
        known = _STDIO_KEYS
    else:
        url = entry.get("url")
        if not isinstance(url, str) or not url.strip():
            raise SkipEntry("missing url")
        data = {
            "name": name,
            "transport": "http",
            "url": url.strip(),
            "headers": _string_map(entry.get("headers", {}), "headers"),
        }
        known = _HTTP_KEYS
    ignored = sorted(set(entry) - known)
    if ignored:
        notes.append("ignored: " + ", ".join(ignored))
    try:
        spec = ServerSpec.model_validate(data)
    except ValidationError as exc:
        msg = str(exc.errors()[0].get("msg", "invalid")).removeprefix("Value error, ")
        raise SkipEntry(msg) from None
    refs = sorted({r for text in _texts(spec) for r in references(text)})
    if refs:
        notes.append(
            "keeps "
            + ", ".join(f"${{{r}}}" for r in refs)
            + " as written; expanded from chit's environment at connect time"
        )
    return spec, notes


def _texts(spec: ServerSpec) -> list[str]:
    return [
        spec.command or "",
        *spec.args,
        *spec.env.values(),
        spec.cwd or "",
        spec.url or "",
        *spec.headers.values(),
    ]


def load_mcp_servers(path: Path) -> dict[str, Any]:
    """Return the ``mcpServers`` object of the JSON file at ``path``.

    Raises:
        UsageError: the file cannot be read, is not JSON, or has no ``mcpServers`` object.
    """
    try:
        raw = read_regular(path, limit=MAX_IMPORT_BYTES)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    document = parse_json(raw, str(path))
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise UsageError(f'{path} has no "mcpServers" object')
    return servers


def import_mcp_servers(
    path: Path | str, registry: Registry, *, replace: bool = False
) -> ImportReport:
    """Register the servers of an ``mcpServers`` JSON file; all or nothing.

    Args:
        path: ``claude_desktop_config.json``, ``.mcp.json``, ``~/.cursor/mcp.json``, ...
        registry: Where to register them.
        replace: Overwrite servers that are already registered under the same name
            (otherwise they are skipped).

    Returns:
        What was imported (with notes) and what was skipped (with the reason).

    Raises:
        UsageError: the file is unreadable or not an ``mcpServers`` file.
        KeyStoreUnavailable: a secret needed sealing and the vault is unavailable
            (nothing is written).
    """
    source = Path(path).expanduser()
    entries = load_mcp_servers(source)
    candidates: list[tuple[ServerSpec, list[str]]] = []
    skipped: list[SkippedServer] = []
    for name, entry in entries.items():
        try:
            candidates.append(convert_entry(name, entry, source))
        except SkipEntry as why:
            skipped.append(SkippedServer(name, str(why)))
    # Seal everything before the write: if the vault is unavailable nothing is written.
    sealed = [(registry.seal(spec), notes) for spec, notes in candidates]
    imported: list[ImportedServer] = []

    def change(servers: dict[str, Any]) -> None:
        for spec, notes in sealed:
            exists = spec.name in servers
            if exists and not replace:
                skipped.append(
                    SkippedServer(spec.name, "already registered (use --replace to overwrite)")
                )
                continue
            servers[spec.name] = spec
            imported.append(ImportedServer(spec.name, spec.transport, exists, notes))

    registry.update(change)
    return ImportReport(str(source), imported, skipped)
