"""Every query chit runs on its own files still has an index (a schema change cannot
silently turn a listing, a reconciler tick or an openWork into a table scan).

The test records each statement — with its parameters — that the store and the sidecar
store send to SQLite while the engine calls and reconciles a task, the CLI's read
commands run in process, the TUI loads its views and the sidecar's tools and executor do
their work. Then it asks SQLite for each statement's plan (``EXPLAIN QUERY PLAN``, same
parameters, same connection settings) and fails on any full scan of a table that is not
in ``ALLOWED_SCANS`` with its reason. Plans are heuristic here (no ``ANALYZE``), so they
do not depend on how many rows the test wrote.
"""

from __future__ import annotations

import json
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import pytest
from click.testing import CliRunner

from chit.cli.main import cli
from chit.demo.server import build_demo_server
from chit.home import Home
from chit.receipts import LifecycleState
from chit.runtime import Supervisor
from chit.sidecar import decisions, principals, queue, stats
from chit.sidecar.anchors import SidecarStore
from chit.sidecar.executor import Executor
from chit.sidecar.owner import StaticOwnerResolver
from chit.store import Store
from chit.store.db import fetch_all
from chit.tasks.client import InProcessServer
from chit.tui import head, loader
from chit.tui.head import read_head
from chit.tui.view import load_detail, load_record
from tests.engine_support import fast_options, supervisor

pytestmark = [pytest.mark.timeout(120)]

#: Full scans that are the point of the statement, each with why it is fine.
ALLOWED_SCANS: dict[str, str] = {
    # A substring search cannot use a b-tree; it scans the rows the other filters leave,
    # per state range, and stops once a page is full (docs/performance.md: FTS5 is the
    # upgrade path past ~10^5 receipts).
    "LIKE ? ESCAPE": "text search",
    # `chit intents --all`: a diagnostic listing of every intent.
    "SELECT * FROM intents ORDER BY created_at": "every intent, for a person",
    # The sidecar's statistics count whole tables (`chit sidecar --stats`).
    "SELECT state, count(*) FROM intents GROUP BY state": "whole-table statistics",
    "GROUP BY failure_class": "whole-table statistics",
    "SELECT min(created_at) FROM intents": "whole-table statistics",
    # The TUI reads every receipt's index entry once when it starts (chit.tui.loader).
    "expires_at, version, status_at FROM receipts": "the TUI's in-memory index, at start",
    # A large store's first page, at start: a top-N sort of every receipt by attention
    # (chit.tui.head), and the same for the receipts of no work record past that page.
    "coalesce(work_ref, '') AS work": "the TUI's first page, at start",
    "WHERE (work_ref IS NULL OR work_ref = '')": "the TUI's first page, at start",
    # Once, after the first paint: the fields the TUI's table shows from receipts' JSON.
    "THEN json_extract(doc, '$.stale_after')": "the TUI's in-memory index, completed once",
    # `chit doctor` and the TUI's start count the sealed handles once (chit.runtime.keys).
    "WHERE handle_blob IS NOT NULL": "a one-off count for the key diagnosis",
    # Tiny tables with a handful of rows (tokens; migrations bookkeeping).
    "FROM principals": "a few tokens",
    "_sqlite_migrations": "migration bookkeeping",
}

_SCAN = re.compile(r"^SCAN (\w+)$")  # a table walked row by row, no index at all
_REAL_CONNECT = sqlite3.connect


@dataclass
class Recorder:
    """Statements seen per database file, with parameters."""

    seen: dict[Path, dict[str, Any]] = field(default_factory=dict)
    active: bool = False  # off while the files are created and migrated

    def add(self, path: Path, sql: str, params: Any) -> None:
        """Keep the first parameters of each distinct read or write statement."""
        if not self.active:
            return
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head in ("SELECT", "UPDATE", "DELETE", "INSERT", "WITH"):
            self.seen.setdefault(path, {}).setdefault(sql, params)


def _recording_connection(recorder: Recorder) -> type[sqlite3.Connection]:
    class RecordingCursor(sqlite3.Cursor):
        def execute(self, sql: str, parameters: Any = (), /) -> Self:
            recorder.add(self.connection.path, sql, parameters)  # type: ignore[attr-defined]
            return super().execute(sql, parameters)

    class RecordingConnection(sqlite3.Connection):
        path: Path

        def cursor(self, factory: Any = RecordingCursor) -> Any:
            return super().cursor(factory)

        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            recorder.add(self.path, sql, parameters)
            return super().execute(sql, parameters)

    return RecordingConnection


def _file_of(database: Any) -> Path:
    """The file a connection opened (a path, or a ``file:`` URI with a query)."""
    text = str(database)
    if text.startswith("file:"):
        text = urllib.parse.unquote(text[len("file:") :].split("?", 1)[0])
    return Path(text).resolve()


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    rec = Recorder()
    factory = _recording_connection(rec)

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = _REAL_CONNECT(database, *args, factory=factory, **kwargs)
        conn.path = _file_of(database)  # type: ignore[attr-defined]
        return conn

    monkeypatch.setattr("chit.store.db.sqlite3.connect", connect)
    yield rec


def _engine(tmp: Path) -> None:
    """Call, follow, reconcile, accept and reject through a real Supervisor."""
    import anyio

    async def go() -> None:
        spec = InProcessServer(build_demo_server(tmp / "tasks.db"))
        async with supervisor(tmp / "home", {"demo": spec}, fast_options("2026")) as sup:
            await _drive(sup)

    anyio.run(go)


async def _drive(sup: Supervisor) -> None:
    first = await sup.call("demo", "slow_compute", {"seconds": 0.05, "label": "a"})
    await sup.follow(first.receipt_id)
    second = await sup.call("demo", "slow_compute", {"seconds": 0.05, "label": "b"})
    await sup.follow(second.receipt_id)
    await sup.reconcile_once()
    sup.accept(first.receipt_id[:12], why="fine")
    sup.reject(second.receipt_id, why="not fine")
    sup.reconciler.due_ids()


def _cli(home: Path, receipt_id: str) -> None:
    runner = CliRunner()
    commands = [
        ["receipts", "--json"],
        ["receipts", "--state", "completed", "--all"],
        ["receipts", "--state", "completed", "--state", "failed", "--json"],
        ["receipts", "--server", "demo", "--state", "working"],
        ["receipts", "--work", "wr-1"],
        ["show", receipt_id[:10], "--json"],
        ["export"],
        ["intents"],
        ["intents", "--all"],
        ["doctor", "--json"],
    ]
    for args in commands:
        result = runner.invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code in (0, 1, 3), (args, result.output)


def _tui(home: Home, receipt_id: str) -> None:
    with Store.open(home) as store:
        now = store.receipts.require(receipt_id).status_at
        _index, newest = loader.read_index(store)
        loader.read_extras(store)
        marks = loader.read_marks(store)
        assert marks.status_at == newest
        loader.changed_since(store, None)
        loader.changed_since(store, marks.status_at)
        loader.read_receipts(store, [receipt_id])
        loader.read_records(store, ["wr-1"])
        loader.read_open_records(store)
        read_head(store, 1, now, 5, ["wr-1"])
        after = {"cutoff": "", "rank": 0, "at": "", "id": "", "limit": 5}
        fetch_all(store.db, head.RECORD_AFTER_SQL, {**after, "work": "wr-1"})
        fetch_all(store.db, head.LOOSE_AFTER_SQL, after)
        load_detail(store, receipt_id, now)
        load_record(store, "wr-1")
        store.receipts.due(now)
        store.receipts.non_terminal()
        store.receipts.list(state=LifecycleState.COMPLETED, after=None, limit=1)
        store.receipts.list(text="b")
        store.receipts.list(server="demo", text="x")


def _sidecar(home: Home) -> None:
    with SidecarStore.open(home.sidecar_db_path) as side:
        first = side.open_work("local", "task-1", "First", idempotency_key="k1")
        side.open_work("local", "task-1", "First", idempotency_key="k1")  # replay
        side.open_work("local", "task-2", "Second")  # no key
        side.enqueue("local", first.item_id, "note", {"text": "hi"}, idempotency_key="k2")
        side.enqueue("local", first.item_id, "status", {"status": "busy"})
        side.inspect("local", first.item_id)
        side.anchors(state="live")
        queue.wake_account_waits(side)
        queue.orphaned_provisionals(side)
        queue.unblock(side, "local", "in_nothing")
        stats.collect(side.db)
        token = principals.add_token(side.db, "bob")
        principals.lookup(side.db, token)
        principals.list_tokens(side.db)
        asked = decisions.ask(side.db, "local", first.item_id, "Go?", None)
        decisions.pending(side.db)
        decisions.decide(side.db, asked.id, "yes")
        side.kill(first.item_id)
    executor = Executor(home, StaticOwnerResolver("acct"))
    try:
        executor.run_once()
        executor.sweep_deleted()
    finally:
        executor.close()


def _plan(path: Path, sql: str, params: Any) -> list[str]:
    conn = _REAL_CONNECT(path)
    try:
        return [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    finally:
        conn.close()


def test_every_query_uses_an_index(tmp_path: Path, recorder: Recorder) -> None:
    home = Home(tmp_path / "home")
    Store.open(home).close()
    SidecarStore.open(home.sidecar_db_path).close()
    recorder.active = True
    _engine(tmp_path)
    with Store.open(home) as store:
        receipt_id = store.receipts.list(limit=1).items[0].receipt_id
    _cli(home.root, receipt_id)
    _tui(home, receipt_id)
    _sidecar(home)

    # chit's own files; the demo task server's file is a test peer, not chit's store.
    ours = {home.db_path.resolve(), home.sidecar_db_path.resolve()}
    assert ours <= set(recorder.seen)
    statements = sum(len(recorder.seen[path]) for path in ours)
    assert statements > 60, "the drive above no longer reaches most queries"
    scans = []
    for path in ours:
        seen = recorder.seen[path]
        for sql, params in seen.items():
            if any(marker in sql for marker in ALLOWED_SCANS):
                continue
            for line in _plan(path, sql, params):
                match = _SCAN.match(line)
                if match and not match.group(1).startswith(("subquery", "sqlite_")):
                    scans.append(f"{path.name}: {line}: {' '.join(sql.split())[:160]}")
    assert not scans, "full table scans:\n" + "\n".join(scans)


def test_recorder_sees_a_scan(tmp_path: Path, recorder: Recorder) -> None:
    """The check can fail: a query on an unindexed column is reported."""
    home = Home(tmp_path / "home")
    recorder.active = True
    with Store.open(home) as store:
        store.receipts.count()
        store.db.conn.execute("SELECT doc FROM receipts WHERE tool = ?", ["x"]).fetchall()
    seen = recorder.seen[home.db_path.resolve()]
    sql = "SELECT doc FROM receipts WHERE tool = ?"
    assert sql in seen
    assert any(_SCAN.match(line) for line in _plan(home.db_path, sql, seen[sql]))
    assert json.dumps(sorted(ALLOWED_SCANS))  # the allowlist stays printable
