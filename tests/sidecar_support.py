"""Helpers for the sidecar tests: homes, in-process clients, subprocess sidecars."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import sqlite_utils
from mcp.client import Client

from chit.home import Home
from chit.sidecar.anchors import SidecarStore
from chit.sidecar.executor import Executor
from chit.sidecar.owner import StaticOwnerResolver
from chit.vault import KeyStoreUnavailable, MemoryKeyStore
from tests.proc_support import start_chit_http
from tests.proc_support import stop as stop  # re-exported for the tests that spawn servers

PYTHON = sys.executable
OWNER = "acct-test"


_target: dict[str, str] = {}


def use_store(target: str | None) -> None:
    """Make :func:`store` and :func:`executor` use ``target`` (a PostgreSQL URL), or the
    home's ``sidecar.db`` again (``None``): the contract tests run on both stores."""
    _target.clear()
    if target is not None:
        _target["url"] = target


def store_fixture_home(request: Any, tmp: Path) -> Any:
    """A fresh home for a test parametrized ``"sqlite"``/``"postgresql"`` (the store is
    the home's file, or a fresh PostgreSQL database); yields it, then resets."""
    home = make_home(tmp)
    use_store(request.getfixturevalue("pg_url") if request.param == "postgresql" else None)
    try:
        yield home
    finally:
        use_store(None)


def raw_write(sc: SidecarStore, sql: str, params: list[Any] | None = None) -> None:
    """One write statement on either store (tests that set up odd states by hand)."""
    from chit.sidecar.sql import immediate, write

    with immediate(sc.db):
        write(sc.db, sql, params or [])


def make_home(tmp: Path) -> Home:
    """A fresh private chit home under ``tmp``."""
    return Home(tmp / "home").ensure()


def executor(
    home: Home, owner: str | None = OWNER, **kw: Any
) -> tuple[Executor, StaticOwnerResolver]:
    """An executor over ``home`` with a hand-set owner (None = account not restored)."""
    resolver = StaticOwnerResolver(owner)
    if "url" in _target:
        kw.setdefault("sidecar_path", _target["url"])
    return Executor(home, resolver, **kw), resolver


def store(home: Home) -> SidecarStore:
    """The sidecar store of ``home``."""
    return SidecarStore.open(_target.get("url") or home.sidecar_db_path)


class LockedKeyStore(MemoryKeyStore):
    """A key store that is unavailable until :meth:`unlock` (the "account" of the tests)."""

    def __init__(self) -> None:
        super().__init__()
        self.locked = True

    def unlock(self) -> None:
        """Make the key store available."""
        self.locked = False

    def get(self) -> bytes | None:
        """Raise while locked, like a keyring without a session."""
        if self.locked:
            raise KeyStoreUnavailable("the keyring is locked (test)")
        return super().get()


async def call(client: Client, tool: str, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Call a tool; return (structured content, is_error)."""
    result = await client.call_tool(tool, args)
    data = result.structured_content
    if data is None:
        data = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return data, bool(result.is_error)


async def raw_text(client: Client, tool: str, args: dict[str, Any]) -> str:
    """A tool result's text content, exactly as sent."""
    result = await client.call_tool(tool, args)
    return result.content[0].text  # type: ignore[union-attr]


def env_for(home: Home) -> dict[str, str]:
    """A subprocess environment for ``home`` (file key store, no keyring prompts)."""
    env = dict(os.environ)
    env["CHIT_HOME"] = str(home.root)
    env["CHIT_KEY_STORE"] = "file"
    env.pop("CHIT_KEY_PASSPHRASE", None)
    return env


def spawn_stdio(home: Home) -> subprocess.Popen[bytes]:
    """Start ``chit sidecar`` over stdio with piped stdin/stdout (stderr discarded)."""
    return subprocess.Popen(
        [PYTHON, "-m", "chit", "sidecar"],
        env=env_for(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def start_http(home: Home, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``chit sidecar --http`` on a free port; return (process, URL) once it listens."""
    return start_chit_http(
        ["sidecar", *extra],
        env=env_for(home),
        log_dir=home.root,
        log_name="sidecar",
        what="sidecar",
        python=PYTHON,
        stdin=subprocess.DEVNULL,
    )


def sqlite_db(sc: SidecarStore) -> sqlite_utils.Database:
    """The store's SQLite database, for raw SQL checks.

    The tests that call this open their stores on files, never on PostgreSQL URLs, so the
    narrowing holds; the assert says so where the type (``SidecarDb``) cannot.
    """
    assert isinstance(sc.db, sqlite_utils.Database), "a SQLite store was expected"
    return sc.db


def check_crash_invariants(db_path: Path, acked: dict[tuple[str, str], str]) -> None:
    """After a crash: the store is sound and every acknowledged start survived, alone.

    ``acked`` maps (principal, idempotency key) to the item id the caller received. The
    checks: ``quick_check`` ok; each acknowledged key has its start intent with that item
    id, and the item its anchor; no anchor without its start intent; no intent without
    its anchor; no duplicate (principal, idempotency key).
    """
    with SidecarStore.open(db_path) as sc:
        assert sc.quick_check() == ["ok"]
        db = sqlite_db(sc)
        rows = db.execute(
            "SELECT i.principal, i.idempotency_key, i.item_id, a.item_id FROM intents i"
            " LEFT JOIN anchors a ON a.item_id = i.item_id WHERE i.kind = 'start'"
        ).fetchall()
        have = {(p, k): i for p, k, i, anchor in rows if anchor is not None}
        lost = {k: v for k, v in acked.items() if have.get(k) != v}
        assert not lost, f"acknowledged starts lost or changed: {list(lost)[:5]}"
        orphan_anchors = db.execute(
            "SELECT count(*) FROM anchors a WHERE NOT EXISTS (SELECT 1 FROM intents i"
            " WHERE i.item_id = a.item_id AND i.kind = 'start')"
        ).fetchone()[0]
        orphan_intents = db.execute(
            "SELECT count(*) FROM intents i WHERE NOT EXISTS"
            " (SELECT 1 FROM anchors a WHERE a.item_id = i.item_id)"
        ).fetchone()[0]
        dupes = db.execute(
            "SELECT count(*) FROM (SELECT principal, idempotency_key FROM intents"
            " WHERE idempotency_key IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1)"
        ).fetchone()[0]
        assert (orphan_anchors, orphan_intents, dupes) == (0, 0, 0)
