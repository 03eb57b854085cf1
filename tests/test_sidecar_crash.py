"""Crash consistency: SIGKILL during openWork, in a loop (notes/reliability.md §4 item 1).

Each round forks three writers, each looping openWork (+ a queued note) and printing an
ack only after the commit returned, kills them with SIGKILL after 0.15-0.4 s, then
checks: quick_check ok, no acknowledged start lost, no anchor without its start intent,
no intent without its anchor, no duplicate (principal, idempotency key), and a replay of
an acknowledged key returns the same item id. ``CHIT_CRASH_ROUNDS`` overrides the 30.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

from chit.sidecar.anchors import SidecarStore
from tests.sidecar_support import make_home

ROUNDS = int(os.environ.get("CHIT_CRASH_ROUNDS", "30"))

pytestmark = pytest.mark.timeout(max(120, ROUNDS * 6))


def _acks(text: str) -> dict[str, str]:
    acked: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("ACK", "REPLAY"):
            acked[parts[1]] = parts[2]
        assert not line.startswith("MISMATCH"), line
    return acked


def _check(db_path: Path, acked: dict[tuple[str, str], str]) -> None:
    with SidecarStore.open(db_path) as store:
        assert store.quick_check() == ["ok"]
        db = store.db
        rows = db.execute(
            "SELECT principal, idempotency_key, item_id FROM intents WHERE kind = 'start'"
        ).fetchall()
        have = {(p, k): i for p, k, i in rows}
        lost = {k: v for k, v in acked.items() if have.get(k) != v}
        assert not lost, f"acknowledged starts lost or changed: {list(lost)[:5]}"
        orphan_anchors = db.execute(
            "SELECT count(*) FROM anchors a WHERE NOT EXISTS (SELECT 1 FROM intents i"
            " WHERE i.item_id = a.item_id AND i.kind = 'start')"
        ).fetchone()[0]
        orphan_intents = db.execute(
            "SELECT count(*) FROM intents i WHERE NOT EXISTS"
            " (SELECT 1 FROM anchors a WHERE a.item_id = i.item_id)"
        ).fetchone()[0]
        dupes = db.execute(
            "SELECT count(*) FROM (SELECT principal, idempotency_key FROM intents"
            " WHERE idempotency_key IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1)"
        ).fetchone()[0]
        assert (orphan_anchors, orphan_intents, dupes) == (0, 0, 0)


def _writer(db_path: Path, principal: str, prefix: str, replay: list[str], fd: int) -> None:
    """openWork (+ a queued note) in a tight loop; ack each key only after its commit."""
    out = os.fdopen(fd, "w", buffering=1)
    store = SidecarStore.open(db_path)
    print("READY", file=out, flush=True)
    for line in replay:  # keys acked by an earlier, killed writer: same key, same id
        key, item = line.split()
        got = store.open_work(principal, "task-" + key, "T", idempotency_key=key)
        tag = "REPLAY" if got.item_id == item else "MISMATCH"
        print(f"{tag} {key} {got.item_id}", file=out, flush=True)
    n = 0
    while True:
        key = f"{prefix}-{n}"
        got = store.open_work(principal, "task-" + key, "T", idempotency_key=key)
        store.enqueue(principal, got.item_id, "note", {"text": "n"}, idempotency_key=key + "-n")
        print(f"ACK {key} {got.item_id}", file=out, flush=True)
        n += 1


def test_sigkill_during_open_work_loop(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    db_path = home.sidecar_db_path
    SidecarStore.open(db_path).close()  # create the schema once
    acked: dict[tuple[str, str], str] = {}
    rng = random.Random(20260)
    # fork: the writers start in milliseconds, so 30 rounds fit the default run.
    ctx = multiprocessing.get_context("fork")
    for rnd in range(ROUNDS):
        writers = []
        for w in range(3):
            principal = f"token:w{w}"
            mine = sorted((k, v) for (p, k), v in acked.items() if p == principal)
            replay = [f"{k} {v}" for k, v in rng.sample(mine, min(3, len(mine)))]
            read_fd, write_fd = os.pipe()
            proc = ctx.Process(
                target=_writer, args=(db_path, principal, f"r{rnd}w{w}", replay, write_fd)
            )
            proc.start()
            os.close(write_fd)
            writers.append((principal, proc, os.fdopen(read_fd, "r")))
        for _, _, reader in writers:  # start the clock once every writer is running
            assert reader.readline().strip() == "READY"
        time.sleep(rng.uniform(0.15, 0.4))
        for _, proc, _ in writers:
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGKILL)
        for principal, proc, reader in writers:
            proc.join(10)
            with reader:
                for key, item in _acks(reader.read()).items():
                    acked[(principal, key)] = item
        _check(db_path, acked)
    assert len(acked) > ROUNDS  # the writers really wrote between kills
