"""Helpers for the sidecar tests: homes, in-process clients, subprocess sidecars."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp.client import Client

from chit.home import Home
from chit.sidecar.anchors import SidecarStore
from chit.sidecar.executor import Executor
from chit.sidecar.owner import StaticOwnerResolver
from chit.vault import KeyStoreUnavailable, MemoryKeyStore

PYTHON = sys.executable
OWNER = "acct-test"


def make_home(tmp: Path) -> Home:
    """A fresh private chit home under ``tmp``."""
    return Home(tmp / "home").ensure()


def executor(
    home: Home, owner: str | None = OWNER, **kw: Any
) -> tuple[Executor, StaticOwnerResolver]:
    """An executor over ``home`` with a hand-set owner (None = account not restored)."""
    resolver = StaticOwnerResolver(owner)
    return Executor(home, resolver, **kw), resolver


def store(home: Home) -> SidecarStore:
    """The sidecar store of ``home``."""
    return SidecarStore.open(home.sidecar_db_path)


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


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_http(home: Home, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``chit sidecar --http`` on a free port; return (process, URL) once it listens."""
    port = free_port()
    log = open(home.root / f"sidecar-http-{port}.log", "wb")  # noqa: SIM115 - process-long
    proc = subprocess.Popen(
        [PYTHON, "-m", "chit", "sidecar", "--http", f"127.0.0.1:{port}", *extra],
        env=env_for(home),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = (home.root / f"sidecar-http-{port}.log").read_text()
            raise RuntimeError(f"sidecar exited: {text}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError("sidecar did not listen within 20 s")


def stop(proc: subprocess.Popen[Any]) -> None:
    """Terminate a subprocess we started, then kill it if needed."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def check_crash_invariants(db_path: Path, acked: dict[tuple[str, str], str]) -> None:
    """After a crash: the store is sound and every acknowledged start survived, alone.

    ``acked`` maps (principal, idempotency key) to the item id the caller received. The
    checks: ``quick_check`` ok; each acknowledged key has its start intent with that item
    id, and the item its anchor; no anchor without its start intent; no intent without
    its anchor; no duplicate (principal, idempotency key).
    """
    with SidecarStore.open(db_path) as sc:
        assert sc.quick_check() == ["ok"]
        db = sc.db
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
