"""Reconciler throughput and latency against ``chit demo-server`` over stdio.

Usage: ``python benchmarks/reconcile.py [TASKS] [SECONDS]`` (default 2000 tasks of 3 s).

1. The engine: TASKS concurrent ``slow_compute`` tasks, reconciled by the Supervisor.
   Measures the time from "all completed on the server" (the newest terminal
   ``lastUpdatedAt``) to "all receipts terminal in the store", and client CPU per poll.
   Run twice: with the write batcher switched off (every check its own transaction, the
   engine as it was) and on.
2. A bare loop: the same number of tasks on one ``TaskClient`` connection, polled with
   ``tasks/get`` on the same schedule policy (server hint within chit's floor), no store.
3. Notification → store latency, both generations (2025: the demo server pushes status
   unasked; 2026: the engine subscribes with ``subscriptions/listen``): server change
   time → receipt committed, p50/p99, batcher off and on; and the part of it spent before
   the terminal notification reached the client (the server's notification queue).

Everything is printed side by side in one table at the end.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.engine_support import demo_stdio, fast_options, supervisor  # noqa: E402

from chit import clock  # noqa: E402
from chit.receipts import LifecycleState, effective_poll_ms  # noqa: E402
from chit.runtime import Completed, EngineEvent  # noqa: E402
from chit.tasks.client import Mode, TaskClient  # noqa: E402


async def _create_all(call: Any, n: int, limit: int = 32) -> None:
    sem = anyio.Semaphore(limit)

    async def one(i: int) -> None:
        async with sem:
            await call(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)


async def engine(tmp: Path, n: int, seconds: float, *, batch: bool) -> dict[str, float]:
    options = fast_options("2026")
    name = f"engine-{batch}"
    lags: list[float] = []

    def on_event(event: EngineEvent) -> None:
        if isinstance(event, Completed) and event.receipt.server_updated_at:
            lags.append((clock.now() - event.receipt.server_updated_at).total_seconds())

    async with supervisor(tmp / name, {"demo": demo_stdio(tmp / f"{name}.db")}, options) as sup:
        if not batch:
            sup.writer.batch_window_s = 0.0
        sup.subscribe(on_event)
        t0 = time.perf_counter()
        await _create_all(
            lambda i: sup.call("demo", "slow_compute", {"seconds": seconds, "label": f"{i}"}), n
        )
        created = time.perf_counter() - t0
        checks0, cpu0 = sup.reconciler.checks, time.process_time()
        tx0 = sup.writer.transactions
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            while sup.reconciler.live_ids():
                await anyio.sleep(0.05)
            done_at = clock.now()
            stop.set()
        cpu = time.process_time() - cpu0
        polls = sup.reconciler.checks - checks0
        transactions = sup.writer.transactions - tx0
        receipts = sup.store.receipts.list(limit=1000)
        server_done = _newest(sup, n)
        assert all(r.state is LifecycleState.COMPLETED for r in receipts.items)
    return {
        "create_s": created,
        "lag_s": (done_at - server_done).total_seconds(),
        "polls": polls,
        "cpu_ms_per_poll": 1000 * cpu / max(polls, 1),
        "transactions": transactions,
        **_spread(lags),
    }


def _spread(lags: list[float]) -> dict[str, float]:
    """Per-task lag (server completion → seen), p50/p99: kept, not printed.

    Both loops start checking only after all tasks are created (16 s for 2,000, longer
    than the tasks), so this mostly measures creation time, not reconciliation.
    """
    lags.sort()
    return {"task_p50_s": statistics.median(lags), "task_p99_s": _p99(lags) / 1000}


def _newest(sup: Any, n: int) -> datetime:
    newest: datetime | None = None
    page = sup.store.receipts.list(limit=1000)
    while True:
        for r in page.items:
            if r.server_updated_at and (newest is None or r.server_updated_at > newest):
                newest = r.server_updated_at
        if page.next_cursor is None:
            break
        page = sup.store.receipts.list(limit=1000, after=page.next_cursor)
    assert newest is not None
    return newest


async def bare(tmp: Path, n: int, seconds: float) -> dict[str, float]:
    async with TaskClient(demo_stdio(tmp / "bare.db"), mode="2026", read_timeout=30) as tc:
        ids: dict[str, float] = {}  # task id → next poll (monotonic)
        updated: list[datetime] = []
        lags: list[float] = []

        async def start(i: int) -> None:
            h = await tc.start(
                "slow_compute", {"seconds": seconds, "label": f"{i}"}, request_key=f"b{i}"
            )
            ids[h.task_id] = time.monotonic() + effective_poll_ms(h.poll_interval_ms) / 1000  # type: ignore[union-attr]

        await _create_all(start, n)
        polls, cpu0 = 0, time.process_time()
        sem = anyio.Semaphore(16)

        async def poll(task_id: str) -> None:
            nonlocal polls
            async with sem:
                snap = await tc.get(task_id)
            polls += 1
            if snap.terminal:
                updated.append(snap.updated_at)
                lags.append((clock.now() - snap.updated_at).total_seconds())
                ids.pop(task_id, None)
            else:
                ids[task_id] = time.monotonic() + effective_poll_ms(snap.poll_interval_ms) / 1000

        inflight: set[str] = set()

        async def guarded(task_id: str) -> None:
            try:
                await poll(task_id)
            finally:
                inflight.discard(task_id)

        async with anyio.create_task_group() as tg:
            while ids:
                now = time.monotonic()
                for task_id, due in list(ids.items()):
                    if due <= now and task_id not in inflight:
                        inflight.add(task_id)
                        tg.start_soon(guarded, task_id)
                await anyio.sleep(0.05)
        done_at = clock.now()
        cpu = time.process_time() - cpu0
    return {
        "lag_s": (done_at - max(updated)).total_seconds(),
        "polls": polls,
        "cpu_ms_per_poll": 1000 * cpu / max(polls, 1),
        **_spread(lags),
    }


def _hint_arrivals(arrivals: dict[str, float]) -> Any:
    """Record, per task, when its terminal notification reached the client (instrumentation).

    Splits notification → store into the server's part (change → notification received:
    the demo server's own notification queue) and the engine's part (the rest).
    """
    original = TaskClient._on_notification

    async def observed(self: TaskClient, task_id: str, params: dict[str, Any]) -> None:
        stamp = params.get("lastUpdatedAt")
        if params.get("status") in ("completed", "failed") and isinstance(stamp, str):
            late = (clock.now() - clock.parse_iso(stamp)).total_seconds()
            arrivals.setdefault(task_id, late)
        await original(self, task_id, params)

    TaskClient._on_notification = observed  # type: ignore[method-assign]
    return original


async def notifications(
    tmp: Path, n: int, seconds: float, *, generation: Mode, batch: bool
) -> dict[str, float]:
    latencies: list[float] = []
    arrivals: dict[str, float] = {}
    original = _hint_arrivals(arrivals)

    def on_event(event: EngineEvent) -> None:
        if isinstance(event, Completed) and event.receipt.server_updated_at:
            latencies.append((clock.now() - event.receipt.server_updated_at).total_seconds())

    options = fast_options(generation)
    name = f"notify-{generation}-{batch}"
    async with supervisor(tmp / name, {"demo": demo_stdio(tmp / f"{name}.db")}, options) as sup:
        if not batch:
            sup.writer.batch_window_s = 0.0
        sup.subscribe(on_event)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            await _create_all(
                lambda i: sup.call("demo", "slow_compute", {"seconds": seconds, "label": f"{i}"}),
                n,
            )
            while sup.reconciler.live_ids():
                await anyio.sleep(0.05)
            stop.set()
        hints = sup.reconciler.message_hints
    TaskClient._on_notification = original  # type: ignore[method-assign]
    late = sorted(arrivals.values()) or [float("nan")]
    latencies.sort()
    return {
        "count": len(latencies),
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": _p99(latencies),
        "hint_p50_ms": 1000 * statistics.median(late),
        "hint_p99_ms": _p99(late),
        "message_hints": hints,
    }


def _p99(values: list[float]) -> float:
    return 1000 * values[min(len(values) - 1, int(len(values) * 0.99))]


def _row(label: str, *cells: str) -> str:
    return f"{label:<44}" + "".join(f"{c:>17}" for c in cells)


async def main(n: int, seconds: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chit-bench-"))
    off = await engine(tmp, n, seconds, batch=False)
    on = await engine(tmp, n, seconds, batch=True)
    b = await bare(tmp, n, seconds)
    m = min(n, 200)
    notify = {
        (gen, batch): await notifications(tmp, m, seconds, generation=gen, batch=batch)
        for gen in ("legacy", "2026")
        for batch in (False, True)
    }
    print(f"tasks {n}, {seconds} s each, demo-server over stdio, 2026 generation, one connection")
    print(_row("", "batcher off", "batcher on", "bare tasks/get"))
    print(_row("server done -> all terminal (s)", *(f"{x['lag_s']:.2f}" for x in (off, on, b))))
    print(
        _row(
            "  ratio to bare (goal <= 1.3x)",
            *(f"{x['lag_s'] / max(b['lag_s'], 1e-3):.2f}x" for x in (off, on)),
            "1.00x",
        )
    )
    print(_row("checks / polls", *(f"{x['polls']:.0f}" for x in (off, on, b))))
    print(_row("client CPU per check (ms)", *(f"{x['cpu_ms_per_poll']:.2f}" for x in (off, on, b))))
    print(
        _row(
            "  ratio to bare",
            *(f"{x['cpu_ms_per_poll'] / b['cpu_ms_per_poll']:.2f}x" for x in (off, on)),
            "1.00x",
        )
    )
    print(_row("write transactions", *(f"{x['transactions']:.0f}" for x in (off, on)), "-"))
    print(_row(f"creating {n} tasks (s)", *(f"{x['create_s']:.1f}" for x in (off, on)), "-"))
    for gen, label in (("legacy", "2025"), ("2026", "2026")):
        cells = [
            f"{notify[(gen, bt)]['p50_ms']:.0f} / {notify[(gen, bt)]['p99_ms']:.0f}"
            for bt in (False, True)
        ]
        print(_row(f"notification -> store {label}, {m} tasks p50/p99 ms", *cells, "-"))
        cells = [
            f"{notify[(gen, bt)]['hint_p50_ms']:.0f} / {notify[(gen, bt)]['hint_p99_ms']:.0f}"
            for bt in (False, True)
        ]
        print(_row("  of which server change -> hint received", *cells, "-"))
        cells = [f"{notify[(gen, bt)]['message_hints']:.0f}" for bt in (False, True)]
        print(_row("  message-only hints (no tasks/get)", *cells, "-"))
    print("goal: notification -> store p99 < 100 ms")


if __name__ == "__main__":
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    anyio.run(main, tasks, secs)
