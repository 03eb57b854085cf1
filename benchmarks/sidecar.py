"""Sidecar benchmarks: openWork throughput and work_start → live latency.

1. openWork transactions/s (``SidecarStore.open_work``: idempotency lookup, task-key
   lookup, anchor + start intent in one ``BEGIN IMMEDIATE``) against the physical
   limit: a raw sqlite3 two-row commit with the same pragmas (WAL, synchronous=FULL).
   Goal: ratio ≥ 0.5.
2. ``work_start`` → anchor ``live`` latency with an executor thread running (p50, p99),
   through the service the MCP tools call.

Run: ``.venv/bin/python benchmarks/sidecar.py [--seconds 3] [--starts 200]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from chit.home import Home
from chit.sidecar.anchors import SidecarStore
from chit.sidecar.executor import Executor, ExecutorThread
from chit.sidecar.owner import StaticOwnerResolver
from chit.sidecar.service import SidecarService


def raw_two_row(path: Path, seconds: float) -> float:
    """Raw sqlite3: BEGIN IMMEDIATE, two inserts, COMMIT, as fast as possible."""
    conn = sqlite3.connect(path, timeout=15, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS items (id TEXT PRIMARY KEY, state TEXT, created_at TEXT)"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS intents (id TEXT PRIMARY KEY,"
        " item_id TEXT REFERENCES items(id), state TEXT, created_at TEXT)"
    )
    n = int(conn.execute("SELECT count(*) FROM items").fetchone()[0])
    start = n
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO items VALUES (?, 'provisional', 'now')", [f"i{n}"])
        conn.execute("INSERT INTO intents VALUES (?, ?, 'pending', 'now')", [f"n{n}", f"i{n}"])
        conn.execute("COMMIT")
        n += 1
    conn.close()
    return (n - start) / seconds


def open_work_rate(path: Path, seconds: float) -> float:
    """openWork through the sidecar store, each with its own task and idempotency key."""
    store = SidecarStore.open(path)
    n = len(store.anchors(limit=1_000_000))
    start = n
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        store.open_work("local", f"task-{n}", "Title", idempotency_key=f"k{n}")
        n += 1
    store.close()
    return (n - start) / seconds


def start_to_live(root: Path, starts: int) -> tuple[float, float]:
    """Milliseconds from work_start's answer to the anchor being live (p50, p99)."""
    home = Home(root).ensure()
    thread = ExecutorThread(
        Executor(home, StaticOwnerResolver("acct-bench")), interval_s=0.05
    ).start()
    service = SidecarService(home, on_queued=thread.wake)
    latencies = []
    try:
        for i in range(starts):
            data, _ = service.start("local", {"task_key": f"t{i}", "title": "T"})
            t0 = time.perf_counter()
            while True:
                anchor = service.store.anchor(data["item_id"])
                if anchor is not None and anchor.state == "live":
                    break
                time.sleep(0.0005)
            latencies.append((time.perf_counter() - t0) * 1000)
    finally:
        thread.stop()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return statistics.median(latencies), p99


def main() -> None:
    """Run both benchmarks and print a Markdown table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--starts", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # Alternate one-second slices: on a shared machine the fsync cost drifts, and a
        # ratio of two runs taken minutes apart would measure the drift.
        raws, ourss = [], []
        for _ in range(max(1, int(args.seconds))):
            raws.append(raw_two_row(root / "raw.db", 1.0))
            ourss.append(open_work_rate(root / "sidecar.db", 1.0))
        raw, ours = statistics.median(raws), statistics.median(ourss)
        p50, p99 = start_to_live(root / "home", args.starts)
    print("| measure | value |")
    print("|---|---|")
    print(f"| raw sqlite3 two-row commit (WAL, FULL) | {raw:,.0f} tx/s |")
    print(f"| openWork (SidecarStore.open_work) | {ours:,.0f} tx/s |")
    print(f"| ratio (goal ≥ 0.5) | {ours / raw:.2f} |")
    label = f"work_start → live, executor running (n={args.starts})"
    print(f"| {label} | p50 {p50:.1f} ms, p99 {p99:.1f} ms |")


if __name__ == "__main__":
    main()
