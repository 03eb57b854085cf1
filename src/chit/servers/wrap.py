"""``chit servers wrap|unwrap CONFIG``: route a host's MCP servers through ``chit proxy``.

``wrap`` imports each ``mcpServers`` entry of a Claude Desktop, Claude Code or Cursor
config into chit's registry (secrets sealed, as ``chit servers import`` does) and
rewrites the entry to launch ``chit proxy NAME``; the host then starts chit in place of
the server, and every task it starts gets a receipt. ``unwrap`` puts the original
entries back.

Only the entries' own text changes (see :mod:`chit.servers.jsonspans`), and the exact
original text of each wrapped entry is recorded in the home (``wrapped/<digest>.json``),
so ``unwrap`` after ``wrap`` gives the original file back byte for byte. Wrapping again
changes nothing. Before the file is rewritten a copy is kept beside it
(``CONFIG.chit-backup-<time>``). Entries chit cannot proxy are left alone with a reason.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chit.errors import UsageError
from chit.home import Home, ensure_private_dir
from chit.servers import jsonspans
from chit.servers.importer import SkipEntry, convert_entry, load_mcp_servers
from chit.servers.registry import Registry
from chit.servers.spec import ServerSpec

CONNECTION_KEYS = frozenset({"type", "command", "args", "env", "cwd", "envFile", "url", "headers"})
"""Keys of an entry that say how to reach the server (replaced by the proxy's launch)."""


@dataclass(frozen=True)
class ProxyLaunch:
    """How a host starts ``chit proxy``: the program, the arguments before ``proxy``, env."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def entry(self, name: str, original: dict[str, Any]) -> dict[str, Any]:
        """The wrapped entry: the launch first, then the host's own keys as they were."""
        out: dict[str, Any] = {}
        if "type" in original:
            out["type"] = "stdio"
        out["command"] = self.command
        out["args"] = [*self.args, "proxy", name]
        if self.env:
            out["env"] = dict(self.env)
        out.update({k: v for k, v in original.items() if k not in CONNECTION_KEYS})
        return out


@dataclass
class WrapReport:
    """What ``wrap`` or ``unwrap`` did (or, with ``--dry-run``, would do) per entry."""

    config: str
    changed: list[dict[str, Any]] = field(default_factory=list)
    unchanged: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    backup: str | None = None
    diff: str = ""
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the report."""
        return asdict(self)


# --- the record of original texts --------------------------------------------------------


def record_path(home: Home, config: Path) -> Path:
    """Where the original entries of ``config`` are kept while it is wrapped."""
    digest = hashlib.sha256(str(config.resolve()).encode()).hexdigest()[:16]
    return home.root / "wrapped" / f"{digest}.json"


def _load_record(path: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UsageError(f"the wrap record {path} cannot be read: {exc}") from None
    entries = data.get("entries") if isinstance(data, dict) else None
    return dict(entries) if isinstance(entries, dict) else {}


def _save_record(home: Home, path: Path, config: Path, entries: dict[str, dict[str, str]]) -> None:
    if not entries:
        path.unlink(missing_ok=True)
        return
    ensure_private_dir(path.parent)
    body = {"version": 1, "config": str(config.resolve()), "entries": entries}
    _atomic_write(path, json.dumps(body, indent=2, ensure_ascii=False) + "\n", mode=0o600)


# --- file helpers ----------------------------------------------------------------------


def _atomic_write(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` (fsynced temporary file renamed over it)."""
    keep = mode if mode is not None else (path.stat().st_mode & 0o777 if path.exists() else 0o600)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, keep)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_text(path: Path) -> str:
    load_mcp_servers(path)  # one clear error for a missing, unreadable or foreign file
    return path.read_bytes().decode("utf-8")


def _backup(path: Path, text: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    backup = path.with_name(f"{path.name}.chit-backup-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.chit-backup-{stamp}-{n}")
    _atomic_write(backup, text, mode=path.stat().st_mode & 0o777)
    return backup


def _diff(path: Path, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"{path} (now)",
        tofile=f"{path} (after)",
    )
    return "".join(lines)


def _servers_member(text: str, path: Path) -> jsonspans.Member:
    member = jsonspans.find_member(text, "mcpServers")
    if member is None or text[member.value_start] != "{":
        raise UsageError(f'{path} has no "mcpServers" object')
    return member


def looks_wrapped(entry: Any, name: str) -> bool:
    """True when ``entry`` already launches ``chit proxy NAME``."""
    if not isinstance(entry, dict):
        return False
    args = entry.get("args")
    return isinstance(args, list) and args[-2:] == ["proxy", name]


# --- wrap --------------------------------------------------------------------------------


def _same_server(registered: ServerSpec, sealed: ServerSpec) -> bool:
    """True when a registered server is the one an entry describes (secrets by fingerprint)."""
    return registered.public_view() == sealed.public_view()


def wrap_config(
    path: Path,
    registry: Registry,
    home: Home,
    launch: ProxyLaunch,
    *,
    dry_run: bool = False,
    replace: bool = False,
) -> WrapReport:
    """Wrap every proxiable entry of ``path``; see the module docstring.

    Args:
        path: The host's config file (``claude_desktop_config.json``, ``.mcp.json``, ...).
        registry: chit's registry the entries are imported into.
        home: chit's home (where the original texts are recorded).
        launch: How the host will start ``chit proxy``.
        dry_run: Only report (with the diff); change nothing anywhere.
        replace: Overwrite a *different* server registered under an entry's name.

    Raises:
        UsageError: the file is unreadable or not an ``mcpServers`` file.
        KeyStoreUnavailable: a secret needed sealing and the vault is unavailable
            (nothing is written).
    """
    path = path.expanduser()
    text = _read_text(path)
    report = WrapReport(config=str(path), dry_run=dry_run)
    rec_path = record_path(home, path)
    record = _load_record(rec_path)
    servers = _servers_member(text, path)
    entries = jsonspans.members(text, servers.value_start)
    names = [m.key for m in entries]
    registered = registry.servers()
    to_register: list[ServerSpec] = []
    edits: list[tuple[jsonspans.Member, str, str]] = []
    unit = jsonspans.indent_unit(text, servers)
    for member in entries:
        name = member.key
        current = member.value_text(text)
        entry = json.loads(current)
        if names.count(name) > 1:
            report.skipped.append({"name": name, "reason": "the name appears twice in the file"})
            continue
        if looks_wrapped(entry, name):
            why = "already wrapped" if name in record else "already launches chit proxy"
            report.unchanged.append({"name": name, "reason": why})
            continue
        try:
            spec, notes = convert_entry(name, entry, path)
        except SkipEntry as why:
            report.skipped.append({"name": name, "reason": str(why)})
            continue
        sealed = registry.seal(spec)
        known = registered.get(name)
        if known is not None and not _same_server(known, sealed):
            if not replace:
                report.skipped.append(
                    {
                        "name": name,
                        "reason": "a different server is registered under this name "
                        "(use --replace to overwrite it)",
                    }
                )
                continue
            notes = [*notes, "replaced the registered server"]
        if known is None or not _same_server(known, sealed):
            to_register.append(sealed)
        multiline = "\n" in current
        new = jsonspans.render(
            launch.entry(name, entry), indent=member.indent(text), unit=unit, multiline=multiline
        )
        edits.append((member, current, new))
        report.changed.append({"name": name, "transport": spec.transport, "notes": notes})
    new_text = text
    for member, _, new in sorted(edits, key=lambda e: e[0].value_start, reverse=True):
        new_text = jsonspans.splice(new_text, member, new)
    report.diff = _diff(path, text, new_text)
    if dry_run or not edits:
        return report

    def register(current: dict[str, ServerSpec]) -> None:
        for spec in to_register:
            current[spec.name] = spec

    registry.update(register)
    report.backup = str(_backup(path, text))
    for member, original, new in edits:
        record[member.key] = {"original": original, "wrapped": new}
    _save_record(home, rec_path, path, record)
    _atomic_write(path, new_text)
    return report


# --- unwrap ------------------------------------------------------------------------------


def unwrap_config(path: Path, home: Home, *, dry_run: bool = False) -> WrapReport:
    """Put back the original text of every entry ``wrap`` changed in ``path``.

    An entry is restored when it is still the one ``wrap`` wrote (as written, or the same
    JSON re-formatted by the host); one changed since is left alone with a reason. The
    servers stay registered in chit (``chit servers remove NAME`` removes one).

    Raises:
        UsageError: the file is unreadable or not an ``mcpServers`` file.
    """
    path = path.expanduser()
    text = _read_text(path)
    report = WrapReport(config=str(path), dry_run=dry_run)
    rec_path = record_path(home, path)
    record = _load_record(rec_path)
    servers = _servers_member(text, path)
    present = {m.key: m for m in jsonspans.members(text, servers.value_start)}
    edits: list[tuple[jsonspans.Member, str]] = []
    remaining = dict(record)
    for name, saved in record.items():
        member = present.get(name)
        if member is None:
            report.skipped.append({"name": name, "reason": "no longer in the file"})
            remaining.pop(name)
            continue
        current = member.value_text(text)
        if current != saved["wrapped"] and json.loads(current) != json.loads(saved["wrapped"]):
            report.skipped.append(
                {"name": name, "reason": "changed since it was wrapped; left as it is"}
            )
            continue
        edits.append((member, saved["original"]))
        report.changed.append({"name": name, "notes": ["still registered in chit"]})
        remaining.pop(name)
    for name, member in present.items():
        if name not in record and looks_wrapped(json.loads(member.value_text(text)), name):
            report.skipped.append(
                {
                    "name": name,
                    "reason": "launches chit proxy, but chit has no record of its "
                    "original entry (it was not wrapped from this home)",
                }
            )
    new_text = text
    for member, original in sorted(edits, key=lambda e: e[0].value_start, reverse=True):
        new_text = jsonspans.splice(new_text, member, original)
    report.diff = _diff(path, text, new_text)
    if dry_run:
        return report
    if edits:
        report.backup = str(_backup(path, text))
        _atomic_write(path, new_text)
    if remaining != record:
        _save_record(home, rec_path, path, remaining)
    return report
