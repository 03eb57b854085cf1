"""Store benchmark: receipt-write throughput against raw sqlite3, and page-listing latency.

Run: ``.venv/bin/python benchmarks/store.py [--slices N] [--per-slice N] [--rows N]``

1. Raw sqlite3 baseline: BEGIN IMMEDIATE; two INSERTs; COMMIT — same pragmas as the store
   (WAL, synchronous=FULL, foreign_keys=ON, busy timeout).
2. ``Store.receipts.insert(receipt, blob, fp, [first_observation])`` — a full receipt
   (pydantic ``doc`` JSON + projections) and its first observation, one transaction;
   receipts in all five states (the figure comparable with earlier runs), and again as
   the server's acceptance makes them (all ``working``).
   Models are built before the clock starts: this measures the store, not pydantic.
3. ``record_acceptance`` (receipt + accepted intent + first observation) for reference.
   All three in interleaved slices (the ratio is the median of per-slice ratios), with
   what explains the ratio whatever the shared disk does beside them: CPU per commit
   (the same workloads with ``synchronous=OFF``, process time) and WAL frames per commit
   by b-tree (``walstat``). The load average is printed before and after.
4. Listing one page (50) out of N receipts: first page, a deep page (keyset cursor in the
   middle), filtered by state, and a text search (which scans).
5. Timelines (``benchmarks/retention.py``): rows and size of a day of 1 s polls, folded
   against one row per poll; the database size before and after ``chit prune``.
6. Cold start: ``chit receipts --json`` in a fresh process on an empty home and on a
   home with one receipt, and ``chit show --json`` of that receipt, interleaved with
   ``python -c pass`` (goal ≤ 0.1 s). ``--cold-only`` runs this part alone.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import retention
import walstat

from chit.home import Home
from chit.receipts import (
    HandleRef,
    Intent,
    LifecycleState,
    Observation,
    ObservationKind,
    ObservationSource,
    Receipt,
    TaskProtocol,
)
from chit.store import Store, immediate
from chit.store.db import BUSY_TIMEOUT_S, JOURNAL_SIZE_LIMIT
from chit.store.paging import encode_cursor

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STATES = list(LifecycleState)


def receipt(i: int, state: LifecycleState | None = None) -> Receipt:
    at = T0 + timedelta(milliseconds=i * 37)
    rid = f"01J{i:012d}"
    return Receipt(
        receipt_id=rid,
        server=f"server-{i % 4}",
        tool="slow_compute",
        purpose=f"benchmark call number {i}",
        args_digest="sha256:" + "ab" * 32,
        request_key=rid,  # as chit makes them: a receipt's id is its request key (0009)
        protocol=TaskProtocol.EXTENSION,
        accepted_at=at,
        status_at=at,
        state=state or STATES[i % len(STATES)],
        next_check_at=at + timedelta(seconds=5),
        handle=HandleRef(fingerprint="0123456789ab", key_id="00" * 8),
    )


def observation(r: Receipt) -> Observation:
    return Observation(
        receipt_id=r.receipt_id,
        at=r.status_at,
        source=ObservationSource.CREATE,
        kind=ObservationKind.STATUS,
        status=r.state,
    )


def intent(r: Receipt) -> Intent:
    return Intent(
        request_key=r.request_key,
        server=r.server,
        tool=r.tool,
        args_digest=r.args_digest,
        created_at=r.accepted_at,
        updated_at=r.accepted_at,
    )


BLOB = b"\x01" + bytes(8) + bytes(12) + b"x" * 48


class RawWriter:
    """The physical limit: BEGIN IMMEDIATE; two INSERTs; COMMIT on a bare connection."""

    def __init__(self, path: Path, synchronous: str = "FULL") -> None:
        self.path = path
        self.conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        self.conn.execute("CREATE TABLE a (id TEXT PRIMARY KEY, doc TEXT NOT NULL)")
        self.conn.execute(
            "CREATE TABLE b (id INTEGER PRIMARY KEY, a_id TEXT REFERENCES a(id), v TEXT)"
        )
        self.next = 0

    def prepare(self, n: int) -> None:
        """Nothing to build: the rows are two strings."""

    def commit(self, _: int = 0) -> None:
        """One two-row transaction."""
        i = self.next
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO a VALUES (?, ?)", [f"id{i}", "x" * 900])
        self.conn.execute("INSERT INTO b (a_id, v) VALUES (?, ?)", [f"id{i}", "status"])
        self.conn.execute("COMMIT")
        self.next += 1


class StoreWriter:
    """The repository path: a full receipt and its first observation (and intent)."""

    def __init__(
        self, home: Path, accept: bool, synchronous: str = "FULL", *, new_task: bool = False
    ) -> None:
        self.store = Store.open(Home(home))
        self.path = self.store.path
        self.conn = self.store.db.conn
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.accept = accept
        # new_task: every receipt as the server's acceptance makes it (working), instead
        # of the comparable figure's mix of all five states.
        self.state = LifecycleState.WORKING if new_task else None
        self.next = 0
        self._rows: list[tuple[Receipt, Observation, Intent]] = []

    def prepare(self, n: int) -> None:
        """Build the next ``n`` models before the clock starts (pydantic is not measured)."""
        first = self.next + len(self._rows)
        receipts = [receipt(i, self.state) for i in range(first, first + n)]
        self._rows.extend((r, observation(r), intent(r)) for r in receipts)

    def commit(self, _: int = 0) -> None:
        """Write one prepared receipt."""
        if not self._rows:
            self.prepare(1)
        r, o, it = self._rows.pop(0)
        if self.accept:
            self.store.receipts.record_acceptance(it, r, o, BLOB, "0123456789ab")
        else:
            self.store.receipts.insert(r, BLOB, "0123456789ab", [o])
        self.next += 1


Writer = RawWriter | StoreWriter


def slices(
    writers: dict[str, Writer], count: int, per_slice: int, clock: Callable[[], float]
) -> dict[str, list[float]]:
    """Alternate ``count`` slices of every workload; return µs per commit, per slice.

    fsync latency on a shared virtual disk drifts by an order of magnitude within minutes;
    measuring the workloads one after another would compare different disks. Short
    slices, alternated, see the same drift.
    """
    samples: dict[str, list[float]] = {k: [] for k in writers}
    for _ in range(count):
        for name, writer in writers.items():
            writer.prepare(per_slice)
            start = clock()
            for _ in range(per_slice):
                writer.commit()
            samples[name].append((clock() - start) / per_slice * 1e6)
    return samples


def timed_ms(fn: Callable[[], object], repeat: int = 30) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def listing(home: Path, rows: int) -> dict[str, float]:
    with Store.open(Home(home)) as store:
        batch = 5000
        for first in range(0, rows, batch):
            with immediate(store.db):  # bulk fill: one transaction per batch
                for i in range(first, min(first + batch, rows)):
                    r = receipt(i)
                    store.receipts.insert(r, BLOB, "0123456789ab", [observation(r)])
        store.checkpoint()
        conn = store.db.conn
        mid = conn.execute(
            "SELECT status_at, receipt_id FROM receipts ORDER BY status_at DESC, receipt_id DESC"
            " LIMIT 1 OFFSET ?",
            [rows // 2],
        ).fetchone()
        deep = encode_cursor(mid[0], mid[1])
        mid_w = conn.execute(
            "SELECT status_at, receipt_id FROM receipts WHERE state = 'working'"
            " ORDER BY status_at DESC, receipt_id DESC LIMIT 1 OFFSET ?",
            [rows // 10],
        ).fetchone()
        deep_w = encode_cursor(mid_w[0], mid_w[1])
        working = LifecycleState.WORKING
        return {
            "first page": timed_ms(lambda: store.receipts.list(limit=50)),
            f"deep page (after row {rows // 2})": timed_ms(
                lambda: store.receipts.list(limit=50, after=deep)
            ),
            "state=working, first page": timed_ms(lambda: store.receipts.list(state=working)),
            "state=working, deep page": timed_ms(
                lambda: store.receipts.list(state=working, after=deep_w)
            ),
            "state=working|failed, first page": timed_ms(
                lambda: store.receipts.list(state=[working, LifecycleState.FAILED])
            ),
            "state=working|failed, deep page": timed_ms(
                lambda: store.receipts.list(state=[working, LifecycleState.FAILED], after=deep_w)
            ),
            "server filter, first page": timed_ms(lambda: store.receipts.list(server="server-2")),
            "server + state=working, first page": timed_ms(
                lambda: store.receipts.list(server="server-2", state=working)
            ),
            "text search (scan), first page": timed_ms(
                lambda: store.receipts.list(text="number 99999"), repeat=5
            ),
            "counts_by_state": timed_ms(store.receipts.counts_by_state, repeat=5),
            "due(now, 100)": timed_ms(
                lambda: store.receipts.due(T0 + timedelta(hours=1), 100), repeat=10
            ),
        }


def cold_start(
    base: Path, rounds: int, against: str | None = None
) -> dict[str, tuple[float, float]]:
    """Median wall and CPU time (ms) of cold commands, interleaved with a bare interpreter.

    ``python -c pass`` against ``chit receipts --json`` on an empty home (no store yet)
    and on a home with one receipt, and ``chit show --json`` of that receipt, each in a
    fresh process, alternated ``rounds`` times so all four see the same machine. With
    ``against`` (another source tree, e.g. main's ``src``) each chit command also runs
    from that tree in the same rounds: a before/after pair measured side by side.
    """
    empty = base / "cold-empty"
    one = Home(base / "cold-one")
    with Store.open(one) as store:
        r = receipt(1)
        store.receipts.insert(r, BLOB, "0123456789ab", [observation(r)])
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "receipts --json, empty home": [
            sys.executable, "-m", "chit", "--home", str(empty), "receipts", "--json",
        ],
        "receipts --json, one receipt": [
            sys.executable, "-m", "chit", "--home", str(one.root), "receipts", "--json",
        ],
        "show --json, one receipt": [
            sys.executable, "-m", "chit", "--home", str(one.root), "show", "--json",
            r.receipt_id[:12],
        ],
    }  # fmt: skip
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
    if os.environ.get("PYTHONPATH"):  # a worktree's run measures the worktree's chit
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    runs = [(name, argv, env) for name, argv in commands.items()]
    if against is not None:
        other = {**env, "PYTHONPATH": against}
        chit = [(name, argv) for name, argv in commands.items() if "chit" in argv]
        runs += [(f"{name} [{against}]", argv, other) for name, argv in chit]
    samples: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    for _ in range(rounds):
        for name, argv, run_env in runs:
            before = _children_cpu()
            start = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True, env=run_env)
            samples[name].append((time.perf_counter() - start) * 1000)
            cpu[name].append((_children_cpu() - before) * 1000)
    # CPU time (user + system) beside the wall time: on a loaded machine the wall time
    # mostly measures waiting for a core, the CPU time what the command itself costs.
    return {k: (statistics.median(v), statistics.median(cpu[k])) for k, v in samples.items()}


def _children_cpu() -> float:
    """User + system seconds of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=15)
    parser.add_argument("--per-slice", type=int, default=200)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--cold", type=int, default=15, help="cold-start rounds (0: skip)")
    parser.add_argument(
        "--no-timelines", action="store_true", help="skip the timeline and prune figures"
    )
    parser.add_argument("--cold-only", action="store_true", help="only the cold-start part")
    parser.add_argument(
        "--cold-against", metavar="SRC", help="also time the cold commands from this source tree"
    )
    args = parser.parse_args()
    print(f"sqlite {sqlite3.sqlite_version}; WAL, synchronous=FULL")
    print(f"before: {walstat.load()}")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        if args.cold_only:
            print_cold(base, args.cold or 15, args.cold_against)
            return
        full: dict[str, Writer] = {
            "raw": RawWriter(base / "raw.db"),
            "insert": StoreWriter(base / "ins", accept=False),
            "new task": StoreWriter(base / "new", accept=False, new_task=True),
            "accept": StoreWriter(base / "acc", accept=True),
        }
        off: dict[str, Writer] = {
            "raw": RawWriter(base / "raw-off.db", "OFF"),
            "insert": StoreWriter(base / "ins-off", accept=False, synchronous="OFF"),
            "new task": StoreWriter(
                base / "new-off", accept=False, synchronous="OFF", new_task=True
            ),
            "accept": StoreWriter(base / "acc-off", accept=True, synchronous="OFF"),
        }
        for writer in (*full.values(), *off.values()):
            writer.prepare(500)
            for _ in range(500):  # past the first pages, as a used file is
                writer.commit()
        wall = slices(full, args.slices, args.per_slice, time.perf_counter)
        cpu = slices(off, args.slices, args.per_slice, time.process_time)
        frames = {}
        for name, w in full.items():
            w.prepare(200)
            frames[name] = walstat.measure_frames(w.path, w.conn, w.commit)
        print(f"after:  {walstat.load()}")
        print(
            f"({args.slices} interleaved slices of {args.per_slice} commits; medians, ratios"
            " per slice [quartiles])"
        )
        raw = wall["raw"]
        print(f"{'':<46}{'tx/s':>8}{'ratio':>8}{'quartiles':>13}{'CPU µs':>8}{'frames':>8}")
        labels = {
            "raw": "raw sqlite3 two-row commit",
            "insert": "receipts.insert (receipt + 1st observation)",
            "new task": "  … every receipt a new task (working)",
            "accept": "record_acceptance (+ intent)",
        }
        for name, label in labels.items():
            ratios = [r / o for r, o in zip(raw, wall[name], strict=True)]
            lo, hi = walstat.quartiles(ratios)
            print(
                f"{label:<46}{1e6 / statistics.median(wall[name]):8.0f}"
                f"{statistics.median(ratios):8.2f}{f'{lo:.2f}–{hi:.2f}':>13}"
                f"{statistics.median(cpu[name]):8.0f}{frames[name][0]:8.2f}"
            )
        print("goal: receipts.insert ratio >= 0.6 (CPU: synchronous=OFF, process time)")
        print("\nWAL frames per commit, by b-tree:")
        for name, figures in frames.items():
            walstat.print_frames(name, figures)
        print(f"\nlisting one page of 50 out of {args.rows:,} receipts (median ms):")
        for name, ms in listing(base / "list", args.rows).items():
            print(f"  {name:<34} {ms:8.2f} ms")
        print(f"after listing: {walstat.load()}")
        if not args.no_timelines:
            retention.timeline_figures(base)
            print(f"after timelines: {walstat.load()}")
        if args.cold:
            print_cold(base, args.cold)


def print_cold(base: Path, rounds: int, against: str | None = None) -> None:
    """Run and print :func:`cold_start` (with the load average after it)."""
    cold = cold_start(base, rounds, against)
    bare, bare_cpu = cold["python -c pass"]
    print(f"\ncold start, median of {rounds} interleaved rounds (goal <= 100 ms):")
    for name, (ms, cpu) in cold.items():
        print(
            f"  {name:<34} {ms:8.1f} ms  ({ms / bare:4.1f}x python -c pass)"
            f"  CPU {cpu:6.1f} ms ({cpu / bare_cpu:4.1f}x)"
        )
    if against is not None:
        print(f"  (rows ending [{against}]: the same command from that tree, same rounds)")
    print(f"after cold start: {walstat.load()}")


if __name__ == "__main__":
    main()
