"""Every database chit creates is complete before anyone can open it.

Regression: ``tests/test_sidecar_stdio.py`` once failed with ``no such table: intents`` —
the sidecar's file existed before its schema committed, and a reader opened it in that
window. Here a raw ``sqlite3`` reader spins on the path while chit creates the file, for
each of chit's three stores, and the sidecar is started and called at once, in a loop.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.client import Client

from chit.home import Home
from chit.sidecar.db import open_sidecar_db
from chit.sidecar.server import build_sidecar_server
from chit.store import Store
from chit.tasks.server.store import TaskStore
from tests.sidecar_support import call, make_home

ROUNDS = 200
NIGHTLY = bool(os.environ.get("CHIT_NIGHTLY"))
# A process start each (~4 s here); the 200 rounds of the race itself run in process below.
PROCESS_ROUNDS = int(os.environ.get("CHIT_RACE_ROUNDS", "200" if NIGHTLY else "6"))


class Spy:
    """Reads ``table`` from ``path`` the moment the file exists, until stopped.

    Records every error a reader sees; an empty list means every read found the table.
    """

    def __init__(self, path: Path, table: str) -> None:
        self.path, self.table = path, table
        self.errors: list[str] = []
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Spy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.path.exists():
                time.sleep(0.0002)
                continue
            try:
                conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)
                try:
                    conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()
                finally:
                    conn.close()
                self.reads += 1
            except sqlite3.Error as exc:
                self.errors.append(str(exc))


def _open_library(path: Path) -> None:
    Store.open_path(path).close()


def _open_sidecar(path: Path) -> None:
    open_sidecar_db(path).close()


def _open_tasks(path: Path) -> None:
    TaskStore(path).close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("opener", "table"),
    [(_open_library, "receipts"), (_open_sidecar, "intents"), (_open_tasks, "tasks")],
    ids=["chit.db", "sidecar.db", "task-store"],
)
def test_a_new_database_is_never_seen_half_built(
    tmp_path: Path, opener: Callable[[Path], None], table: str
) -> None:
    seen = 0
    for n in range(ROUNDS):
        directory = tmp_path / f"r{n}"
        directory.mkdir(mode=0o700)
        path = directory / "store.db"
        with Spy(path, table) as spy:
            opener(path)
            # Let the reader get at least one look at the finished file.
            deadline = time.monotonic() + 5
            while spy.reads == 0 and not spy.errors and time.monotonic() < deadline:
                time.sleep(0.001)
        assert spy.errors == [], f"round {n}: a reader saw {spy.errors[0]!r}"
        seen += spy.reads
        assert (path.stat().st_mode & 0o777) == 0o600
        assert sorted(p.name for p in directory.iterdir() if p.name.startswith(".")) == []
    assert seen >= ROUNDS


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.timeout(240)
async def test_sidecar_started_and_called_at_once_in_process(tmp_path: Path) -> None:
    # The sidecar server is built and called at once on a fresh home, while a reader
    # opens its store the moment it appears: 200 rounds, no reader ever sees it half-built.
    for n in range(ROUNDS):
        home = Home(tmp_path / f"h{n}")
        with Spy(home.sidecar_db_path, "intents") as spy:
            server, _service = build_sidecar_server(home)
            async with Client(server) as client:
                data, is_error = await call(
                    client, "work_start", {"task_key": f"t{n}", "title": "race"}
                )
        assert not is_error, data
        assert spy.errors == [], f"round {n}: a reader saw {spy.errors[0]!r}"


@pytest.mark.timeout(900)
def test_sidecar_process_started_and_called_at_once(tmp_path: Path) -> None:
    # The original flake, as a process: spawn ``chit sidecar`` and read its store the
    # moment the file appears. CI runs a bounded number of rounds (CHIT_RACE_ROUNDS);
    # CHIT_NIGHTLY=1 runs 200.
    from tests.test_sidecar_stdio import RawSidecar

    for n in range(PROCESS_ROUNDS):
        home = make_home(tmp_path / f"p{n}")
        with Spy(home.sidecar_db_path, "intents") as spy:
            side = RawSidecar(home)
            try:
                side.request(
                    0,
                    "initialize",
                    {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "race", "version": "0"},
                    },
                )
                assert "result" in side.reply(0)
                args = {"task_key": "t", "title": "T"}
                side.request(1, "tools/call", {"name": "work_start", "arguments": args})
                reply = side.reply(1)
            finally:
                side.close()
        assert reply["result"]["isError"] is False, reply
        assert spy.errors == [], f"round {n}: a reader saw {spy.errors[0]!r}"


@pytest.mark.parametrize("opener", [_open_library, _open_sidecar], ids=["chit.db", "sidecar.db"])
def test_a_new_database_is_created_whole(tmp_path: Path, opener: Callable[[Path], None]) -> None:
    # What a fresh file gets on its first connection must be in the published file too:
    # WAL, incremental auto-vacuum (chit prune gives pages back), the schema version.
    path = tmp_path / "store.db"
    opener(path)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL
        assert conn.execute("PRAGMA user_version").fetchone()[0] > 0
    finally:
        conn.close()
