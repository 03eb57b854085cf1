"""Timeline figures for ``benchmarks/store.py``: rows per day of polling, and ``chit prune``.

1. One day of 1 s polls of one receipt with a handful of real changes, through the store's
   write path: timeline rows and file size now (changes folded) against one row per poll
   (as before; written with the same statement, without folding).
2. A store holding settled receipts with long timelines (as older chit versions wrote
   them) and live ones: its size before and after the real ``chit prune --older-than 30d``
   (a subprocess), the rows it removed, and the same for a file created before chit made
   stores ``auto_vacuum=INCREMENTAL`` (converted by one ``VACUUM``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from chit import clock
from chit.home import Home
from chit.receipts import (
    AcceptanceDecided,
    AcceptanceState,
    LifecycleState,
    ResultObserved,
    StatusObserved,
)
from chit.reconcile.writer import ReceiptWriter
from chit.store import Store
from chit.store.db import immediate
from chit.store.retention import file_bytes

T0 = datetime(2025, 1, 1, tzinfo=UTC)  # long settled by the time the benchmark runs
ROOT = Path(__file__).resolve().parents[1]


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:8.2f} MiB"


def _seed(home: Home, count: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tests.cli_support import seed_many

    return seed_many(home, count)


def one_day(base: Path, seconds: int = 86_400, changes: int = 6) -> None:
    """A day of 1 s polls for one receipt: folded rows vs one row per poll."""
    clock.freeze(T0)
    try:
        sizes = {}
        for fold in (True, False):
            home = Home(base / f"day-{fold}")
            rid = _seed(home, 1)[0]
            with Store.open(home) as store:
                writer = ReceiptWriter(store)
                every = seconds // changes
                started = time.perf_counter()
                with immediate(store.db):
                    for tick in range(1, seconds + 1):
                        clock.advance(1)
                        status = StatusObserved(
                            status=LifecycleState.WORKING,
                            message=f"step {tick // every} of {changes}",
                            poll_interval_ms=1000,
                        )
                        if not fold:  # the old way: a new row for every poll
                            status = StatusObserved(
                                status=LifecycleState.WORKING,
                                message=f"step {tick // every} of {changes} (poll {tick})",
                                poll_interval_ms=1000,
                            )
                        writer.apply(rid, [status])
                elapsed = time.perf_counter() - started
                rows = store.observations.count(rid)
                store.checkpoint()
                sizes[fold] = (rows, file_bytes(store.path), elapsed)
        (new_rows, new_size, t_new), (old_rows, old_size, t_old) = sizes[True], sizes[False]
        print(f"one receipt polled every second for {seconds:,} s, {changes} real changes:")
        print(f"  one row per poll (before): {old_rows:>7,} rows {_mib(old_size)} ({t_old:.1f} s)")
        print(f"  changes folded (now):      {new_rows:>7,} rows {_mib(new_size)} ({t_new:.1f} s)")
    finally:
        clock.unfreeze()


def _long_timelines(home: Home, settled: int, live: int, rows: int) -> None:
    """Receipts with ``rows`` distinct timeline rows each; ``settled`` of them accepted."""
    clock.freeze(T0)
    try:
        ids = _seed(home, settled + live)
        with Store.open(home) as store:
            writer = ReceiptWriter(store)
            with immediate(store.db):
                for n, rid in enumerate(ids):
                    for i in range(rows):
                        clock.advance(0.001)
                        message = f"step {i} of {rows}: " + "processing batch " * 4
                        writer.apply(
                            rid, [StatusObserved(status=LifecycleState.WORKING, message=message)]
                        )
                    if n < settled:
                        writer.apply(
                            rid,
                            [
                                StatusObserved(status=LifecycleState.COMPLETED, message="done"),
                                ResultObserved(summary="ok"),
                                AcceptanceDecided(state=AcceptanceState.ACCEPTED, why="fine"),
                            ],
                        )
            store.checkpoint()
    finally:
        clock.unfreeze()


def _prune(home: Home) -> dict[str, object]:
    env = {**os.environ, "CHIT_HOME": str(home.root)}
    out = subprocess.run(
        [sys.executable, "-m", "chit", "prune", "--older-than", "30d", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report: dict[str, object] = json.loads(out.stdout)
    return report


def prune_figures(base: Path, settled: int = 300, live: int = 100, rows: int = 300) -> None:
    """Database size before and after ``chit prune`` (incremental file, and an old one)."""
    for old_file in (False, True):
        home = Home(base / f"prune-{old_file}")
        _long_timelines(home, settled, live, rows)
        if old_file:  # as stores were created before auto_vacuum=INCREMENTAL
            conn = sqlite3.connect(home.db_path)
            conn.execute("PRAGMA auto_vacuum=NONE")
            conn.execute("VACUUM")
            conn.close()
        with Store.open(home) as store:
            before_rows = store.observations.count()
        report = _prune(home)
        with Store.open(home) as store:
            after_rows = store.observations.count()
        kind = "file from before INCREMENTAL" if old_file else "auto_vacuum=INCREMENTAL file"
        print(
            f"chit prune --older-than 30d ({kind}; {settled} settled + {live} live receipts, "
            f"{rows} rows each):"
        )
        print(f"  before: {before_rows:>9,} rows {_mib(int(str(report['bytes_before'])))}")
        print(
            f"  after:  {after_rows:>9,} rows {_mib(int(str(report['bytes_after'])))}"
            f"  ({report['rows']:,} rows of {report['receipts']} receipts pruned"
            f"{', converted' if report['converted'] else ''})"
        )


def timeline_figures(base: Path) -> None:
    """Everything above, in order."""
    print("\ntimelines:")
    one_day(base)
    prune_figures(base)
