"""Task server on SQLite (one process) vs PostgreSQL (1 and 2 replicas), side by side.

Usage: ``python benchmarks/scale.py [--rounds 3] [--creates 300] [--gets 1500]
[--clients 16] [--latency 60]``

Starts a throwaway PostgreSQL cluster with its default durability (fsync on, as a real
server runs) and ``chit demo-server --http`` processes:

* ``sqlite``: one process on a SQLite file;
* ``pg×1``: one replica on a PostgreSQL database;
* ``pg×2``: two replicas on one PostgreSQL database, the clients split between them.

Per round, every setup in turn (interleaved, so machine load hits all of them alike):

1. task creates/s: ``--clients`` concurrent 2026 clients create ``slow_compute
   seconds=0`` tasks, ``--creates`` in all;
2. ``tasks/get``/s: the same clients poll existing tasks, ``--gets`` in all.

Ratios to ``sqlite`` are taken per round; the table shows medians. Then the notification
latency across replicas: a client subscribed (``subscriptions/listen``) on replica B to a
task replica A runs; latency = the task's terminal ``lastUpdatedAt`` → the
``notifications/tasks`` arriving at B (p50/p99 over ``--latency`` tasks), beside the same
on one replica and on two SQLite processes (which only re-read rows every 0.2 s).
The client runs in this one process: on a small machine it is part of what is measured,
and the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pg_support import create_database, new_cluster, remove_cluster  # noqa: E402
from tests.proc_support import start_chit_http, stop  # noqa: E402
from tests.tasks_server_support import (  # noqa: E402
    PYTHON,
    TaskWatch,
    create,
    demo_env,
    make_client,
    raw,
)


class Setup:
    """Server processes of one configuration, and the URLs clients use (round robin)."""

    def __init__(self, name: str, store_args: list[list[str]], tmp: Path) -> None:
        self.name = name
        self.procs: list[Any] = []
        self.urls: list[str] = []
        for i, args in enumerate(store_args):
            proc, url = start_chit_http(
                ["demo-server", *args],
                env=demo_env(tmp),
                log_dir=tmp,
                log_name=f"{name}-{i}",
                what=name,
                python=PYTHON,
            )
            self.procs.append(proc)
            self.urls.append(url)

    def close(self) -> None:
        for proc in self.procs:
            stop(proc)


async def _spread(
    clients: list[Any], total: int, op: Callable[[Any, int], Awaitable[None]]
) -> float:
    """Run ``op`` ``total`` times over ``clients`` (each sequential); return ops/s."""
    counter = iter(range(total))

    async def worker(client: Any) -> None:
        for i in counter:
            await op(client, i)

    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(worker, client)
    return total / (time.perf_counter() - began)


async def throughput(setup: Setup, n_clients: int, creates: int, gets: int) -> dict[str, float]:
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(make_client(setup.urls[i % len(setup.urls)], "2026"))
            for i in range(n_clients)
        ]
        ids: list[str] = []

        async def do_create(client: Any, i: int) -> None:
            task = await create(client, "2026", "slow_compute", {"seconds": 0, "label": f"{i}"})
            ids.append(task["taskId"])

        async def do_get(client: Any, i: int) -> None:
            await raw(client, "tasks/get", {"taskId": ids[i % len(ids)]})

        create_rate = await _spread(clients, creates, do_create)
        get_rate = await _spread(clients, gets, do_get)
    return {"creates/s": create_rate, "gets/s": get_rate}


def _ms(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


async def latency(url_run: str, url_listen: str, n: int) -> list[float]:
    """ms from a task's terminal ``lastUpdatedAt`` to its notification at ``url_listen``."""
    watch = TaskWatch()
    lags: list[float] = []
    async with (
        make_client(url_run, "2026") as a,
        make_client(url_listen, "2026", extensions=[watch]) as b,
    ):
        for i in range(n):
            # Durations spread over 0.15-0.41 s, so completions do not fall in step with
            # a re-reading replica's 0.2 s cycle (which would flatter the re-read path).
            seconds = 0.15 + (i % 8) * 0.037
            args = {"seconds": round(seconds, 3), "label": f"{i}"}
            task_id = (await create(a, "2026", "slow_compute", args))["taskId"]
            arrived: list[float] = []
            watch.seen.clear()

            async def listen(tid: str = task_id) -> None:
                await raw(b, "subscriptions/listen", {"notifications": {"taskIds": [tid]}}, 60)

            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                with anyio.fail_after(30):
                    while not arrived:
                        for seen in watch.seen:
                            if seen.get("status") == "completed":
                                arrived.append(time.time() * 1000)
                                lags.append(arrived[0] - _ms(seen["lastUpdatedAt"]))
                                break
                        await anyio.sleep(0.001)
                tg.cancel_scope.cancel()
    return lags


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chit-scale-"))
    cluster = new_cluster(durable=True)
    try:
        pg1 = create_database(cluster.url, "scale1")
        pg2 = create_database(cluster.url, "scale2")
        setups = [
            Setup("sqlite", [["--db", str(tmp / "tasks.db")]], tmp),
            Setup("pg×1", [["--store", pg1]], tmp),
            Setup("pg×2", [["--store", pg2], ["--store", pg2]], tmp),
        ]
        try:
            rows: dict[str, list[dict[str, float]]] = {s.name: [] for s in setups}
            for _ in range(args.rounds):
                for setup in setups:
                    rows[setup.name].append(
                        await throughput(setup, args.clients, args.creates, args.gets)
                    )
            print(f"\nThroughput, {args.clients} clients, median of {args.rounds} rounds")
            print(f"{'setup':8} {'creates/s':>10} {'ratio':>6} {'gets/s':>8} {'ratio':>6}")
            base = rows["sqlite"]
            for name, figures in rows.items():
                c = statistics.median(f["creates/s"] for f in figures)
                g = statistics.median(f["gets/s"] for f in figures)
                cr = statistics.median(
                    f["creates/s"] / b["creates/s"] for f, b in zip(figures, base, strict=True)
                )
                gr = statistics.median(
                    f["gets/s"] / b["gets/s"] for f, b in zip(figures, base, strict=True)
                )
                print(f"{name:8} {c:10.0f} {cr:6.2f} {g:8.0f} {gr:6.2f}")
            sqlite2 = Setup("sqlite×2", [["--db", str(tmp / "two.db")]] * 2, tmp)
            setups.append(sqlite2)
            pairs = {
                "pg, same replica": (setups[1].urls[0], setups[1].urls[0]),
                "pg, A → B (push)": (setups[2].urls[0], setups[2].urls[1]),
                "sqlite, A → B (re-read)": (sqlite2.urls[0], sqlite2.urls[1]),
            }
            print(
                "\nNotification latency, terminal lastUpdatedAt → notifications/tasks"
                f" ({args.latency} tasks)"
            )
            print(f"{'path':26} {'p50 ms':>7} {'p99 ms':>7}")
            for label, (run_url, listen_url) in pairs.items():
                lags = await latency(run_url, listen_url, args.latency)
                print(f"{label:26} {_pct(lags, 0.5):7.1f} {_pct(lags, 0.99):7.1f}")
        finally:
            for setup in setups:
                setup.close()
    finally:
        remove_cluster(cluster)
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--creates", type=int, default=300)
    parser.add_argument("--gets", type=int, default=1500)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--latency", type=int, default=60)
    anyio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    main()
