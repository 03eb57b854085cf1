"""TUI benchmark: first paint and RSS with 100,000 receipts vs an empty store, filter latency.

    python benchmarks/tui.py [--receipts 100000]

Each case runs in its own process (RSS is the process's peak). First paint is measured
from app start to the first published snapshot with the table filled; filter latency from
setting the ``/`` filter to the repainted table. Goals: first paint ≤ 1.5× the empty-store
time, RSS ≤ 300 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chit.home import Home
from chit.receipts import LifecycleState, Receipt, TaskProtocol
from chit.store import Store, immediate

STATES = list(LifecycleState)


def seed(root: Path, count: int) -> Home:
    """Write ``count`` receipts in batches of one transaction each."""
    home = Home(root).ensure()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    with Store.open(home) as store:
        for start in range(0, count, 5000):
            with immediate(store.db):
                for i in range(start, min(count, start + 5000)):
                    at = t0 + timedelta(seconds=i)
                    r = Receipt(
                        receipt_id=f"01BENCH{i:019d}",
                        server=f"srv{i % 7}",
                        tool="slow_compute",
                        purpose=f"job number {i}",
                        args_digest="sha256:x",
                        request_key=f"rk{i}",
                        protocol=TaskProtocol.EXTENSION,
                        accepted_at=at,
                        status_at=at,
                        state=STATES[i % len(STATES)] if i % 50 else LifecycleState.WORKING,
                    )
                    store.receipts._insert_row(r, None, None)
    return home


async def measure(root: Path) -> dict[str, float]:
    from chit.tui.app import ChitApp
    from chit.tui.backend import Backend, Mode
    from chit.tui.config import TuiSettings

    app = ChitApp(Backend(Home(root), Mode()), TuiSettings(bell=False), tick=None)
    start = time.perf_counter()
    async with app.run_test(size=(160, 48)) as pilot:
        while app.snapshot.now.year < 2000:
            await pilot.pause(0.005)
        await pilot.pause()
        first_paint = time.perf_counter() - start
        before = app.snapshot
        t = time.perf_counter()
        app.set_filter("state:failed srv3")
        while app.snapshot is before:
            await pilot.pause(0.002)
        await pilot.pause()
        filter_s = time.perf_counter() - t
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"first_paint_s": first_paint, "filter_s": filter_s, "rss_mb": rss_mb}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--receipts", type=int, default=100_000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(Path(args.child)))))
        return
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, count in (("empty", 0), (f"{args.receipts}", args.receipts)):
            root = Path(tmp) / name
            seed(root, count)
            runs = [
                json.loads(
                    subprocess.run(
                        [sys.executable, __file__, "--child", str(root)],
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                )
                for _ in range(3)
            ]
            results[name] = {k: min(r[k] for r in runs) for k in runs[0]}
    empty, full = results["empty"], results[f"{args.receipts}"]
    print(f"{'case':>10} {'first paint':>12} {'filter':>10} {'RSS':>8}")
    for name, r in results.items():
        print(
            f"{name:>10} {r['first_paint_s'] * 1000:>10.0f}ms"
            f" {r['filter_s'] * 1000:>8.0f}ms {r['rss_mb']:>6.0f}MB"
        )
    print(f"first paint ratio {full['first_paint_s'] / empty['first_paint_s']:.2f}× (goal ≤ 1.5×)")


if __name__ == "__main__":
    main()
