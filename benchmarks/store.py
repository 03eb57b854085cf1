"""Store benchmark: receipt-write throughput against raw sqlite3, and page-listing latency.

Run: ``.venv/bin/python benchmarks/store.py [--writes N] [--rows N]``

1. Raw sqlite3 baseline: BEGIN IMMEDIATE; two INSERTs; COMMIT — same pragmas as the store
   (WAL, synchronous=FULL, foreign_keys=ON, busy timeout).
2. ``Store.receipts.insert(receipt, blob, fp, [first_observation])`` — a full receipt
   (pydantic ``doc`` JSON + projections) and its first observation, one transaction.
   Models are built before the clock starts: this measures the store, not pydantic.
3. ``record_acceptance`` (receipt + accepted intent + first observation) for reference.
4. Listing one page (50) out of N receipts: first page, a deep page (keyset cursor in the
   middle), filtered by state, and a text search (which scans).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

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


def receipt(i: int) -> Receipt:
    at = T0 + timedelta(milliseconds=i * 37)
    return Receipt(
        receipt_id=f"01J{i:012d}",
        server=f"server-{i % 4}",
        tool="slow_compute",
        purpose=f"benchmark call number {i}",
        args_digest="sha256:" + "ab" * 32,
        request_key=f"rk-{i:012d}",
        protocol=TaskProtocol.EXTENSION,
        accepted_at=at,
        status_at=at,
        state=STATES[i % len(STATES)],
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

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        self.conn.execute("CREATE TABLE a (id TEXT PRIMARY KEY, doc TEXT NOT NULL)")
        self.conn.execute(
            "CREATE TABLE b (id INTEGER PRIMARY KEY, a_id TEXT REFERENCES a(id), v TEXT)"
        )
        self.next = 0

    def write(self, n: int) -> float:
        """Write ``n`` transactions; return tx/s."""
        start = time.perf_counter()
        for i in range(self.next, self.next + n):
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("INSERT INTO a VALUES (?, ?)", [f"id{i}", "x" * 900])
            self.conn.execute("INSERT INTO b (a_id, v) VALUES (?, ?)", [f"id{i}", "status"])
            self.conn.execute("COMMIT")
        self.next += n
        return n / (time.perf_counter() - start)


class StoreWriter:
    """The repository path: a full receipt and its first observation (and intent)."""

    def __init__(self, home: Path, accept: bool) -> None:
        self.store = Store.open(Home(home))
        self.accept = accept
        self.next = 0

    def write(self, n: int) -> float:
        """Write ``n`` receipts (models built before the clock starts); return tx/s."""
        receipts = [receipt(i) for i in range(self.next, self.next + n)]
        rows = [(r, observation(r), intent(r)) for r in receipts]
        start = time.perf_counter()
        for r, o, it in rows:
            if self.accept:
                self.store.receipts.record_acceptance(it, r, o, BLOB, "0123456789ab")
            else:
                self.store.receipts.insert(r, BLOB, "0123456789ab", [o])
        self.next += n
        return n / (time.perf_counter() - start)


def interleaved(base: Path, writes: int, slices: int = 10) -> dict[str, float]:
    """Alternate short slices of the three workloads and return median tx/s of each.

    fsync latency on a shared virtual disk drifts by an order of magnitude within minutes;
    measuring the workloads one after another would compare different disks. Slices of
    ``writes // slices`` transactions, alternated, see the same drift.
    """
    n = max(writes // slices, 1)
    writers = {
        "raw": RawWriter(base / "raw.db"),
        "insert": StoreWriter(base / "ins", accept=False),
        "accept": StoreWriter(base / "acc", accept=True),
    }
    samples: dict[str, list[float]] = {k: [] for k in writers}
    ratios: dict[str, list[float]] = {"insert": [], "accept": []}
    for _ in range(slices):
        round_tps = {k: w.write(n) for k, w in writers.items()}
        for k, v in round_tps.items():
            samples[k].append(v)
        for k in ratios:
            ratios[k].append(round_tps[k] / round_tps["raw"])
    result = {k: statistics.median(v) for k, v in samples.items()}
    result.update({f"{k} ratio": statistics.median(v) for k, v in ratios.items()})
    return result


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
            "server filter, first page": timed_ms(lambda: store.receipts.list(server="server-2")),
            "text search (scan), first page": timed_ms(
                lambda: store.receipts.list(text="number 99999"), repeat=5
            ),
            "counts_by_state": timed_ms(store.receipts.counts_by_state, repeat=5),
            "due(now, 100)": timed_ms(
                lambda: store.receipts.due(T0 + timedelta(hours=1), 100), repeat=10
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    print(f"sqlite {sqlite3.sqlite_version}; WAL, synchronous=FULL; {args.writes} writes each")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        fig = interleaved(base, args.writes)
        raw, ins, acc = fig["raw"], fig["insert"], fig["accept"]
        print("(10 interleaved slices; medians of tx/s and of the per-slice ratio)")
        print(f"raw sqlite3 two-row commit:                {raw:8.0f} tx/s")
        print(
            f"receipts.insert (receipt + 1st observation): {ins:6.0f} tx/s"
            f"  ratio {fig['insert ratio']:.2f}"
        )
        print(
            f"record_acceptance (+ intent):              {acc:8.0f} tx/s"
            f"  ratio {fig['accept ratio']:.2f}"
        )
        print(f"\nlisting one page of 50 out of {args.rows:,} receipts (median ms):")
        for name, ms in listing(base / "list", args.rows).items():
            print(f"  {name:<34} {ms:8.2f} ms")


if __name__ == "__main__":
    main()
