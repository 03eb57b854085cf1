"""TUI benchmark: first paint, RSS, filter latency, and the CPU of an open TUI.

    python benchmarks/tui.py [--receipts 100000] [--live 1000] [--idle-s 30] [--only PART]

PART: ``paint`` (first paint, filter, RSS) or ``cpu`` (an open TUI); default both.

1. First paint and RSS with 100,000 receipts vs an empty store, and filter latency. Each
   case runs in its own process (RSS is the process's peak), best of 3. First paint is
   measured from app start to the first published snapshot with the table filled; the
   filter from setting the ``/`` filter (after the keystroke debounce) to the repainted
   table, and from a keystroke in the filter box to the repainted table (debounce
   included). Goals: first paint ≤ 1.5× the empty-store time, RSS ≤ 300 MB, filter
   ≤ 50 ms.
2. The CPU of an open TUI — ``chit`` in a 160×48 pseudo-terminal, the daemon's client —
   on a home with ``--live`` live receipts the daemon holds (scheduled, none due in the
   window, so none changes), over ``--idle-s`` seconds after the first paint, and the
   daemon's meanwhile. Goal < 1 % of a core for the TUI (the reconciler's cost is the
   daemon's, measured in ``benchmarks/daemon.py``).

The load average is printed: figures on a busy machine are noisy.
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

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/: _pty, daemon

from _pty import load  # benchmarks/ is on the path when run as a script

from chit.home import Home
from chit.receipts import LifecycleState, Receipt, TaskProtocol
from chit.store import Store, immediate

STATES = list(LifecycleState)


def seed(root: Path, count: int, *, live: bool = False) -> Home:
    """Write ``count`` receipts in batches of one transaction each.

    ``live``: every receipt is working, observed over the last hours, its next check an
    hour away (the daemon holds them live; none is due while the benchmark watches).
    """
    home = Home(root).ensure()
    now = datetime.now(UTC)
    t0 = now - timedelta(seconds=count + 600) if live else datetime(2026, 1, 1, tzinfo=UTC)
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
                        state=(
                            LifecycleState.WORKING
                            if live or not i % 50
                            else STATES[i % len(STATES)]
                        ),
                        next_check_at=now + timedelta(hours=1) if live else None,
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
        # A keystroke in the filter box: debounce, index, repaint.
        await pilot.press("escape")
        while app.query_text:
            await pilot.pause(0.002)
        await pilot.pause()
        await pilot.press("slash")
        await pilot.pause()
        before = app.snapshot
        t = time.perf_counter()
        await pilot.press("5")
        while app.snapshot is before:
            await pilot.pause(0.002)
        await pilot.pause()
        key_s = time.perf_counter() - t
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"first_paint_s": first_paint, "filter_s": filter_s, "key_s": key_s, "rss_mb": rss_mb}


def open_tui_cpu(base: Path, live: int, idle_s: float) -> None:
    """CPU of an open TUI (the daemon's client, in a pty) and of the daemon, idle."""
    from _pty import open_tui
    from daemon import cpu_s, daemon_pid, env_for, stop_daemon

    root = base / "live"
    seed(root, live, live=True)
    env = {**env_for(root, daemon=True), "TERM": "xterm-256color"}
    try:
        with open_tui(env, drawn=b"job number", timeout=120) as (tui, drawn):
            assert drawn, "the TUI did not draw its table"
            time.sleep(5)  # past the start: the idle figure, not a transient
            daemon = daemon_pid(root)
            before = cpu_s(tui.pid), cpu_s(daemon)
            time.sleep(idle_s)
            tui_used, daemon_used = cpu_s(tui.pid) - before[0], cpu_s(daemon) - before[1]
            print(
                f"open TUI, daemon client, {live} live receipts, nothing changes: TUI "
                f"{tui_used / idle_s * 100:.2f} %, daemon {daemon_used / idle_s * 100:.2f} % "
                f"of a core over {idle_s:g} s (goal < 1 % for the TUI)"
            )
    finally:
        stop_daemon(root)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--receipts", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=1000)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--only", choices=["paint", "cpu"], action="append")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(Path(args.child)))))
        return
    parts = set(args.only or ["paint", "cpu"])
    print(f"before: {load()}")
    if "cpu" in parts:
        with tempfile.TemporaryDirectory(prefix="chit-bench-") as tmp:
            open_tui_cpu(Path(tmp), args.live, args.idle_s)
    if "paint" in parts:
        paint(args.receipts)
    print(f"after: {load()}")


def paint(receipts: int) -> None:
    """First paint, filter and RSS: the empty store vs ``receipts`` receipts."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, count in (("empty", 0), (f"{receipts}", receipts)):
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
    empty, full = results["empty"], results[f"{receipts}"]
    print(f"{'case':>10} {'first paint':>12} {'filter':>10} {'keystroke':>10} {'RSS':>8}")
    for name, r in results.items():
        print(
            f"{name:>10} {r['first_paint_s'] * 1000:>10.0f}ms"
            f" {r['filter_s'] * 1000:>8.0f}ms {r['key_s'] * 1000:>8.0f}ms {r['rss_mb']:>6.0f}MB"
        )
    print(f"first paint ratio {full['first_paint_s'] / empty['first_paint_s']:.2f}× (goal ≤ 1.5×)")


if __name__ == "__main__":
    main()
