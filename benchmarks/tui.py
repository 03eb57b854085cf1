"""TUI benchmark: first paint, RSS, filter latency, and the CPU of an open TUI.

    python benchmarks/tui.py [--receipts 100000] [--live 1000] [--idle-s 30] [--only PART]
                             [--against SRC]

PART: ``paint`` (first paint, filter, RSS) or ``cpu`` (an open TUI); default both.
``--against SRC``: the paint cases run also with chit imported from ``SRC`` (another
checkout's ``src``, e.g. main before a change), interleaved with this one's: a before/
after comparison side by side, under the same load.

1. First paint and RSS with 100,000 receipts vs an empty store, and filter latency. Each
   case runs in its own process (RSS is the process's peak), the two cases interleaved,
   best of 3. First paint is measured from app start to the screen's first compositor
   update after the first published snapshot (the first page's rows on screen);
   "settled" when the index behind it is read and filled too; the
   filter from setting ``state:failed srv3`` to the repaint (the screen's next
   compositor update), and each of ten keystrokes typed one at a time into the ``/``
   box to its repaint (median and worst; a lone key is not held by the debounce). CPU
   beside each (the process's). Goals: first paint ≤ 1.5× the empty-store time,
   RSS ≤ 300 MB, keystroke → repaint ≤ 50 ms with 100,000 receipts.
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
from typing import Any

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


KEYS = ["5", "backspace", "7", "backspace", "9", "backspace", "j", "backspace", "z", "backspace"]
"""Keystrokes typed into the ``/`` box one at a time (each after the last one's repaint)."""


async def measure(root: Path) -> dict[str, float]:
    """First paint, filter latencies and peak RSS of one app on ``root`` (headless).

    A repaint is the screen's first compositor update (``App._display``) after the
    snapshot was published (the table's watchers ran). Each keystroke is sent as the
    terminal driver sends it and waited for without Pilot's idle waits (which add tens
    of milliseconds of their own).
    CPU is the process's, over the same interval: less sensitive to a busy machine.
    """
    import statistics

    from textual import events

    from chit.tui.app import ChitApp
    from chit.tui.backend import Backend, Mode
    from chit.tui.config import TuiSettings

    app = ChitApp(Backend(Home(root), Mode()), TuiSettings(bell=False), tick=None)
    shown: list[float] = []
    start = time.perf_counter()
    async with app.run_test(size=(160, 48)) as pilot:
        display = app._display

        def counted(screen: Any, renderable: Any) -> None:
            shown.append(time.perf_counter())
            display(screen, renderable)

        app._display = counted  # type: ignore[method-assign]
        published: list[float] = [0.0]
        first_published: list[float] = []  # kept: later publishes (the index) move published
        publish = app.publish

        def stamped(snapshot: Any) -> None:
            publish(snapshot)  # the table shows it (its watchers ran): now the repaint
            published[0] = time.perf_counter()
            if not first_published:
                first_published.append(published[0])

        app.publish = stamped  # type: ignore[method-assign]
        while app.snapshot.now.year < 2000:
            await asyncio.sleep(0.002)
        # The first compositor update after the first publish: the rows are on screen.
        # (Not Pilot's idle wait: it waits for the process's CPU to fall, and the index
        # is read in the background after the first paint.)
        # (The index's own publish may come before that update and need no redraw, so the
        # wait is for an update after the FIRST publish, not after the latest one.)
        while not first_published or not shown or shown[-1] < first_published[0]:
            await asyncio.sleep(0.001)
        first_paint = next(t for t in shown if t >= first_published[0]) - start
        while not app.settled:  # the index's fill (after the first paint)
            await asyncio.sleep(0.005)
        settled = time.perf_counter() - start

        async def repaint(act: Any) -> tuple[float, float]:
            before, seen = app.snapshot, len(shown)
            t, cpu = time.perf_counter(), time.process_time()
            act()
            while app.snapshot is before:
                await asyncio.sleep(0.0005)
            # The compositor update after the publish (one before it showed the old rows).
            while len(shown) == seen or shown[-1] < published[0]:
                await asyncio.sleep(0.0005)
            wall, used = shown[-1] - t, time.process_time() - cpu
            await pilot.pause()  # let it settle before the next one
            while not app.settled:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.1)  # past the debounce: each key is typed on its own
            return wall, used

        filter_s, filter_cpu = await repaint(lambda: app.set_filter("state:failed srv3"))
        await repaint(lambda: app.set_filter(""))
        await pilot.press("slash")
        await pilot.pause()
        driver = app._driver
        assert driver is not None
        walls, cpus = [], []
        for key in KEYS:
            char = key if len(key) == 1 else None
            wall, used = await repaint(lambda k=key, c=char: driver.send_message(events.Key(k, c)))
            walls.append(wall)
            cpus.append(used)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "first_paint_s": first_paint,
        "settled_s": settled,
        "filter_s": filter_s,
        "filter_cpu_s": filter_cpu,
        "key_s": statistics.median(walls),
        "key_cpu_s": statistics.median(cpus),
        "key_max_s": max(walls),
        "rss_mb": rss_mb,
    }


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
    parser.add_argument("--against", type=Path, help="another checkout's src, compared")
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
        paint(args.receipts, args.against)
    print(f"after: {load()}")


def paint(receipts: int, against: Path | None = None) -> None:
    """First paint, filter and RSS: the empty store vs ``receipts`` receipts.

    With ``against``, each case runs with that checkout's chit too (its rows marked
    ``before``), in the same interleaved rounds.
    """
    import os

    trees: list[tuple[str, str | None]] = [("", None)]
    if against is not None:
        trees.insert(0, ("before ", str(against.resolve())))
    with tempfile.TemporaryDirectory() as tmp:
        stores = (("empty", 0), (f"{receipts}", receipts))
        for name, count in stores:
            seed(Path(tmp) / name, count)
        cases = [(label + name, name, src) for label, src in trees for name, _ in stores]
        runs: dict[str, list[dict[str, float]]] = {case: [] for case, _, _ in cases}
        for _ in range(3):  # interleaved: every case sees the same load
            for case, name, src in cases:
                env = dict(os.environ)
                if src is not None:
                    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(Path(tmp) / name)],
                    check=True,
                    capture_output=True,
                    text=True,
                    env=env,
                ).stdout
                runs[case].append(json.loads(out))
        results = {case: {k: min(r[k] for r in rs) for k in rs[0]} for case, rs in runs.items()}
    print(
        f"{'case':>17} {'first paint':>12} {'settled':>9} {'filter set':>11} {'(cpu)':>7}"
        f" {'keystroke':>10} {'(cpu)':>7} {'(worst)':>8} {'RSS':>7}"
    )
    for case, r in results.items():
        print(
            f"{case:>17} {r['first_paint_s'] * 1000:>10.0f}ms {r['settled_s'] * 1000:>7.0f}ms"
            f" {r['filter_s'] * 1000:>9.0f}ms {r['filter_cpu_s'] * 1000:>5.0f}ms"
            f" {r['key_s'] * 1000:>8.0f}ms {r['key_cpu_s'] * 1000:>5.0f}ms"
            f" {r['key_max_s'] * 1000:>6.0f}ms {r['rss_mb']:>5.0f}MB"
        )
    for label, _ in trees:
        empty, full = results[label + "empty"], results[f"{label}{receipts}"]
        print(
            f"{label}first paint ratio {full['first_paint_s'] / empty['first_paint_s']:.2f}×"
            " (goal ≤ 1.5×)"
        )
        print(
            f"{label}keystroke -> repaint: {full['key_s'] * 1000:.0f} ms with {receipts}"
            f" receipts vs {empty['key_s'] * 1000:.0f} ms empty"
            f" ({full['key_s'] / empty['key_s']:.2f}×; goal ≤ 50 ms)"
        )


if __name__ == "__main__":
    main()
