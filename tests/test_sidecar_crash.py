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
from tests.sidecar_support import check_crash_invariants, make_home

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
        check_crash_invariants(db_path, acked)
    assert len(acked) > ROUNDS  # the writers really wrote between kills
