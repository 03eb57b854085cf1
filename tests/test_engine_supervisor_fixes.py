"""Supervisor regressions: a busy store, the lease under reconcile_once/follow, --wait."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from chit.cli.engine import wait_exit_code
from chit.clock import ManualClock
from chit.demo.server import build_demo_server
from chit.errors import Conflict, ExitCode
from chit.receipts import RetrievalCondition, RetrievalFailed
from chit.receipts.policy import MAX_RETRIEVAL_FAILURES
from chit.runtime import Supervisor
from chit.store.errors import StoreBusy
from chit.tasks.client import HttpServer, InProcessServer, ServerSpec
from tests.engine_support import fast_options, supervisor
from tests.proc_support import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _demo(tmp_path: Path) -> dict[str, ServerSpec]:
    return {"demo": InProcessServer(build_demo_server(tmp_path / "tasks.db"))}


async def _until(predicate: Any, within: float = 5.0) -> None:
    with anyio.fail_after(within):
        while not predicate():
            await anyio.sleep(0.02)


async def _run_until(clk: ManualClock, predicate: Any, within: float = 10.0) -> None:
    """Move virtual time on in small steps until ``predicate()`` (a real server answers)."""
    with anyio.fail_after(within):
        while not predicate():
            await clk.run_for(0.01)


def _make_due(sup: Supervisor) -> None:
    past = "2000-01-01T00:00:00Z"
    sup.store.db.execute(
        "UPDATE receipts SET next_check_at = ?, doc = json_set(doc, '$.next_check_at', ?)",
        [past, past],
    )
    sup.store.db.conn.commit()


async def test_busy_store_in_heartbeat_does_not_end_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clk = ManualClock()
    options = fast_options(heartbeat_s=0.1)
    async with supervisor(tmp_path / "home", _demo(tmp_path), options, clock=clk) as sup:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            await clk.run_for(0)
            assert sup.lease.held
            failures: list[str] = []

            def busy(*_a: Any, **_k: Any) -> Any:
                failures.append("x")
                raise StoreBusy("the chit store is busy (another process is writing)")

            def conflict(*_a: Any, **_k: Any) -> Any:
                raise Conflict("lost a race")

            monkeypatch.setattr(sup.lease, "beat", busy)
            monkeypatch.setattr(sup.store.intents, "list", conflict)
            await clk.run_for(0.35)  # three heartbeats, every one of them failing
            assert len(failures) == 3
            assert sup.lease.held  # only a confirmed takeover loses the lease
            monkeypatch.undo()
            await clk.run_for(0.1)  # the next beat lands
            assert sup.lease.held and sup.lease.holder() is not None
            clk.advance(sup.options.lease_stale_s + 1)  # its stamp is virtual time too
            assert sup.lease.holder() is None
            stop.set()


async def test_reconcile_once_keeps_a_running_supervisors_lease(tmp_path: Path) -> None:
    async with supervisor(tmp_path / "home", _demo(tmp_path)) as sup:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            await _until(lambda: sup.lease.held)
            report = await sup.reconcile_once()
            assert not report.viewer
            assert sup.lease.held
            holder = sup.lease.holder()
            assert holder is not None and holder.owner == sup.lease.owner
            stop.set()


async def test_follow_under_a_held_lease_keeps_it(tmp_path: Path) -> None:
    async with supervisor(tmp_path / "home", _demo(tmp_path)) as sup:
        r = await sup.call("demo", "slow_compute", {"seconds": 0.3})
        assert sup.lease.try_acquire()
        done = await sup.follow(r.receipt_id)
        assert done.is_terminal
        assert sup.lease.held and sup.lease.holder() is not None


async def test_follow_stops_reconciling_after_losing_the_lease(tmp_path: Path) -> None:
    clk = ManualClock()
    options = fast_options(heartbeat_s=0.1, lease_stale_s=30.0)
    async with supervisor(tmp_path / "home", _demo(tmp_path), options, clock=clk) as sup:
        r = await sup.call("demo", "slow_compute", {"seconds": 30})
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.follow, r.receipt_id)
            _make_due(sup)
            await _run_until(clk, lambda: sup.lease.held and sup.reconciler.checks >= 1)
            sup.store.db.execute("UPDATE lease SET owner = 'someone-else'")
            sup.store.db.conn.commit()
            await clk.run_for(0.1)  # the heartbeat runs and sees the takeover
            assert not sup.lease.held
            _make_due(sup)
            checks = sup.reconciler.checks
            await clk.run_for(0.5)  # five more looks at the store, each finding it due
            assert sup.reconciler.checks == checks  # a viewer now: watches, does not check
            row = sup.store.db.execute("SELECT owner FROM lease").fetchone()
            assert row[0] == "someone-else"
            tg.cancel_scope.cancel()


async def test_follow_returns_when_the_server_stays_unreachable(tmp_path: Path) -> None:
    servers = _demo(tmp_path)
    async with supervisor(tmp_path / "home", servers) as sup:
        r = await sup.call("demo", "slow_compute", {"seconds": 30})
        servers["demo"] = HttpServer(f"http://127.0.0.1:{free_port()}/mcp")  # nobody listens
        sup.pool.broken("demo")
        down = RetrievalFailed(condition=RetrievalCondition.UNREACHABLE, message="refused")
        for _ in range(MAX_RETRIEVAL_FAILURES - 1):
            sup.writer.apply(r.receipt_id, [down])
        _make_due(sup)
        with anyio.fail_after(20):
            followed = await sup.follow(r.receipt_id)
        assert followed.retrieval is RetrievalCondition.UNREACHABLE
        assert followed.retrieval_failures >= MAX_RETRIEVAL_FAILURES
        assert wait_exit_code(followed) is ExitCode.UNREACHABLE


def test_read_timeout_setting_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from chit.cli.engine import options_from_env
    from chit.errors import UsageError

    for bad in ("abc", "0", "-3", "nan"):
        monkeypatch.setenv("CHIT_READ_TIMEOUT", bad)
        with pytest.raises(UsageError):
            options_from_env()
    monkeypatch.setenv("CHIT_READ_TIMEOUT", "2.5")
    assert options_from_env().client.read_timeout == 2.5


def test_handle_unavailable_is_a_key_store_error() -> None:
    from chit.errors import ChitError
    from chit.reconcile import HandleUnavailable

    exc = HandleUnavailable("the sealed task handle was wiped")
    assert isinstance(exc, ChitError) and exc.exit_code is ExitCode.KEY_STORE


def _sending_intent(sup: Supervisor, owner: str | None) -> str:
    from chit import clock
    from chit.receipts import new_intent, new_request_key

    now = clock.now()
    intent = new_intent(
        request_key=new_request_key(now),
        server="demo",
        tool="slow_compute",
        args_digest=sup.arguments_digest({}),
        now=now,
    )
    sup.store.intents.begin(intent, owner=owner)
    return intent.request_key


async def test_a_live_senders_in_flight_call_is_not_marked_unknown(tmp_path: Path) -> None:
    from chit.receipts import IntentState

    home, servers = tmp_path / "home", _demo(tmp_path)
    options = fast_options(intent_grace_s=0.0)
    clk = ManualClock()
    async with supervisor(home, servers, options, clock=clk) as daemon:
        async with supervisor(home, servers, options, clock=clk) as caller:
            key = _sending_intent(caller, caller.intent_owner)  # caller waits for its reply
            clk.advance(60)
            assert daemon.resume_intents() == 0
            intent = daemon.store.intents.get(key)
            assert intent is not None and intent.state is IntentState.SENDING
        # The caller is gone: its call's outcome is now unknown.
        assert daemon.resume_intents() == 1
        intent = daemon.store.intents.get(key)
        assert intent is not None and intent.state is IntentState.UNKNOWN


async def test_a_dead_processes_sending_intent_becomes_unknown(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    from chit.receipts import IntentState

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    options = fast_options(intent_grace_s=0.0)
    clk = ManualClock()
    async with supervisor(tmp_path / "home", _demo(tmp_path), options, clock=clk) as sup:
        dead = _sending_intent(sup, f"{socket.gethostname()}|{proc.pid}|abc")
        remote = _sending_intent(sup, "elsewhere.example|1|abc")  # cannot be probed: waits
        legacy = _sending_intent(sup, None)
        clk.advance(1)  # remote senders are given the result timeout (30 s): not yet
        assert sup.resume_intents() == 2
        states = {k: sup.store.intents.get(k).state for k in (dead, remote, legacy)}  # type: ignore[union-attr]
        assert states == {
            dead: IntentState.UNKNOWN,
            remote: IntentState.SENDING,
            legacy: IntentState.UNKNOWN,
        }


async def test_intent_moves_check_the_state_they_move_from(tmp_path: Path) -> None:
    from chit.errors import NotFound
    from chit.receipts import IntentState

    async with supervisor(tmp_path / "home", _demo(tmp_path)) as sup:
        with pytest.raises(NotFound):
            sup.abandon_intent("NOPE")
        with pytest.raises(NotFound):
            await sup.retry_intent("NOPE", {})
        key = _sending_intent(sup, sup.intent_owner)
        with pytest.raises(Conflict):  # lost a race: it is not unknown any more
            sup.store.intents.mark(key, IntentState.ABANDONED, expected=IntentState.UNKNOWN)
        sup.store.intents.mark(key, IntentState.UNKNOWN, expected=IntentState.SENDING)
        sup.abandon_intent(key)
        intent = sup.store.intents.get(key)
        assert intent is not None and intent.state is IntentState.ABANDONED


async def test_a_call_whose_commits_wait_is_never_marked_unknown(tmp_path: Path) -> None:
    """A heartbeat's intent recovery while a call's intent or acceptance waits for its
    group commit leaves the call alone (it once marked it unknown under the call)."""
    from chit.receipts import IntentState
    from chit.runtime import EngineEvent, IntentUnknown

    events: list[EngineEvent] = []
    resumed: list[int] = []
    async with supervisor(
        tmp_path / "home", _demo(tmp_path), fast_options(intent_grace_s=0.0)
    ) as sup:
        sup.subscribe(events.append)
        run = sup.writer.group.run

        async def heartbeat_first(op: Any, then: Any = None) -> Any:
            resumed.append(sup.resume_intents())  # a heartbeat while the commit waits
            return await run(op, then)

        sup.writer.group.run = heartbeat_first  # type: ignore[method-assign]
        r = await sup.call("demo", "slow_compute", {"seconds": 60})
        intent = sup.store.intents.get(r.request_key)
        assert intent is not None and intent.state is IntentState.ACCEPTED
    assert resumed == [0, 0]  # the intent's commit, then the acceptance's
    assert not [e for e in events if isinstance(e, IntentUnknown)]
