"""The Supervisor hosts the sidecar executor; with the sidecar process's own, both are safe."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from chit.errors import ChitError, ExitCode
from chit.home import Home
from chit.runtime import Supervisor
from chit.runtime.sidecar_host import executor_wanted, failure_answer
from chit.sidecar.executor import Executor
from chit.sidecar.owner import VaultOwnerResolver
from chit.store import Store
from chit.vault import FileKeyStore
from tests.sidecar_support import PYTHON, env_for, make_home, sqlite_db, stop, store

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

NOTES = 3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _env(home: Home, **extra: str) -> dict[str, str]:
    return {"CHIT_KEY_STORE": "file", "CHIT_HOME": str(home.root), **extra}


async def test_hosted_only_when_the_home_uses_the_sidecar(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    async with Supervisor.open(home, environ=_env(home)) as sup:
        assert sup.executor is None and not home.sidecar_db_path.exists()
    async with Supervisor.open(home, environ=_env(home, CHIT_SIDECAR_EXECUTOR="1")) as sup:
        assert sup.executor is not None
    store(home).close()  # the sidecar ran once: its store exists
    assert executor_wanted(home, _env(home))
    async with Supervisor.open(home, environ=_env(home)) as sup:
        hosted = getattr(sup.executor, "__self__", None)
        assert isinstance(hosted, Executor)
        # The same library file the TUI writes, and the owner the sidecar process computes.
        assert hosted.home.db_path == sup.home.db_path
        standalone = VaultOwnerResolver(home, key_store=FileKeyStore(home.key_file))
        assert hosted.owner.resolve() == standalone.resolve() is not None
    async with Supervisor.open(home, environ=_env(home, CHIT_SIDECAR_EXECUTOR="0")) as sup:
        assert sup.executor is None


async def test_supervisor_applies_intents_from_run(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    with store(home) as sc:
        item = sc.open_work("local", "t", "Hosted").item_id
        sc.enqueue("local", item, "note", {"text": "one"})
    async with Supervisor.open(home, environ=_env(home)) as sup:
        stop_event = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop_event)
            with anyio.fail_after(20):
                while _open_intents(home):
                    await anyio.sleep(0.05)
            stop_event.set()
        record = sup.store.work.get(item)
        assert record is not None and record.title == "Hosted"
        assert [n.text for n in sup.store.work.notes(item)] == ["one"]


def _open_intents(home: Home) -> int:
    with store(home) as sc:
        row = (
            sqlite_db(sc)
            .execute(
                "SELECT count(*) FROM intents WHERE state IN ('pending', 'retrying', 'blocked')"
            )
            .fetchone()
        )
    return int(row[0])


async def test_sidecar_process_and_supervisor_apply_each_intent_once(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    store(home).close()
    counted: dict[str, int] = {"supervisor": 0}
    async with Supervisor.open(home, environ=_env(home)) as sup:  # creates the data key
        hosted = getattr(sup.executor, "__self__", None)
        assert isinstance(hosted, Executor)
        apply = hosted.apply

        def counting(intent: Any, owner: str | None) -> Any:
            counted["supervisor"] += 1
            return apply(intent, owner)

        hosted.apply = counting  # type: ignore[method-assign]
        per_burst = 6 * (NOTES + 2)
        items: list[str] = []
        # 1. The sidecar process alone (stdio, idle client) applies a first burst.
        proc = _sidecar_process(home)
        try:
            items += await anyio.to_thread.run_sync(_burst, home, 0)
            await _drained(home)
        finally:
            stop(proc)
        assert counted["supervisor"] == 0
        stop_event = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop_event)
            # 2. The Supervisor's hosted executor alone applies the next one.
            items += await anyio.to_thread.run_sync(_burst, home, 1)
            await _drained(home)
            assert counted["supervisor"] == per_burst
            # 3. Both at once, on the same queue: the race this test is about.
            proc = _sidecar_process(home)
            try:
                for burst in range(2, 8):
                    items += await anyio.to_thread.run_sync(_burst, home, burst)
                await _drained(home)
            finally:
                stop(proc)
            stop_event.set()
    total = len(items) * (NOTES + 2)
    with store(home) as sc:
        states = dict(
            sqlite_db(sc).execute("SELECT state, count(*) FROM intents GROUP BY 1").fetchall()
        )
        replays = (
            sqlite_db(sc)
            .execute("SELECT count(*) FROM intents WHERE failure_class IS NOT NULL")
            .fetchone()[0]
        )
    assert states == {"applied": total} and replays == 0
    with Store.open(home) as library:
        for item in items:
            record = library.work.get(item)
            assert record is not None and record.status == "completed"
            assert [n.text for n in library.work.notes(item)] == [f"n{i}" for i in range(NOTES)]
        assert len(library.work.list(limit=10_000)) == len(items)
    # Each intent was applied exactly once, by one of the two executors.
    assert per_burst <= counted["supervisor"] <= total - per_burst


def _sidecar_process(home: Home) -> subprocess.Popen[bytes]:
    """``chit sidecar`` over stdio with an idle client: its standalone executor runs."""
    return subprocess.Popen(
        [PYTHON, "-m", "chit", "sidecar"],
        env=env_for(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _drained(home: Home) -> None:
    """Wait until no intent is open (executors in other threads and processes apply them)."""
    with anyio.fail_after(40):
        while _open_intents(home):
            await anyio.sleep(0.1)


def _burst(home: Home, burst: int) -> list[str]:
    out = []
    with store(home) as sc:
        for k in range(6):
            key = f"b{burst}-{k}"
            item = sc.open_work("local", key, key, idempotency_key=key).item_id
            for i in range(NOTES):
                sc.enqueue("local", item, "note", {"text": f"n{i}"})
            sc.enqueue("local", item, "complete", {"summary": "ok"})
            out.append(item)
    return out


@pytest.mark.parametrize(
    ("code", "failure_class"),
    [
        (ExitCode.KEY_STORE, "transient"),
        (ExitCode.STORE, "transient"),
        (ExitCode.UNREACHABLE, "transient"),
        (ExitCode.USAGE, "permanent"),
        (ExitCode.NOT_FOUND, "permanent"),
        (ExitCode.PROTOCOL, "permanent"),
    ],
)
def test_a_call_chit_could_not_make_says_whether_a_retry_can_help(
    code: ExitCode, failure_class: str
) -> None:
    """Both gateways (in process and through the daemon) answer a ChitError this way."""
    answer = failure_answer(ChitError("server 'files' is not reachable", exit_code=code))
    assert answer["receipt_id"] is None
    assert answer["state"] == "failed"
    assert answer["failure_class"] == failure_class
    assert answer["reason"] == "server 'files' is not reachable"
