"""A check starts from the receipt in hand only while its stored version is still that one.

``ReceiptCheck._read`` keeps the receipt each check wrote and checks its version before
the next check; ``Reconciler.kick`` reads the versions of all the receipts it starts in
one query. Another writer (here a second connection, as another process would) must
still be seen by the very next check, whichever way its version was read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chit.demo.server import build_demo_server
from chit.home import Home
from chit.receipts import CancelPosture, CancelRequested, ObservationSource, Receipt
from chit.reconcile.writer import ReceiptWriter
from chit.store import Store, StoreError
from chit.tasks.client import InProcessServer
from tests.engine_support import fast_options, supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("together", [True, False])
async def test_the_next_check_sees_another_writers_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, together: bool
) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        rids = []
        for i in range(3):
            made = await sup.call("demo", "slow_compute", {"seconds": 3600, "label": f"{i}"})
            rids.append(made.receipt_id)
        for rid in rids:
            await rec.check(rid)  # each now in hand, as its check wrote it
        in_hand = {rid: rec._known[rid] for rid in rids}

        with Store.open(Home(tmp_path / "home")) as other:  # another process's write
            ReceiptWriter(other).apply(rids[0], [CancelRequested()])
            elsewhere = other.receipts.require(rids[0])
        assert elsewhere.version > in_hand[rids[0]].version

        seen: dict[str, Receipt] = {}
        observe = rec.observer.observe

        async def spied(client: Any, receipt: Receipt, *args: Any) -> Any:
            seen[receipt.receipt_id] = receipt
            return await observe(client, receipt, *args)

        monkeypatch.setattr(rec.observer, "observe", spied)
        batched: list[list[str]] = []
        versions = sup.store.receipts.versions

        def counted(ids: list[str]) -> dict[str, int]:
            batched.append(list(ids))
            return versions(ids)

        monkeypatch.setattr(sup.store.receipts, "versions", counted)
        if together:
            rec.kick(rids, ObservationSource.POLL)
        else:
            for rid in rids:
                rec.kick([rid], ObservationSource.POLL)
        await rec.idle()

        assert batched == ([rids] if together else [])
        assert seen[rids[0]] == elsewhere  # read again: the other writer's version
        assert seen[rids[0]].cancel.posture is CancelPosture.REQUESTED
        for rid in rids[1:]:
            assert seen[rid] is in_hand[rid]  # nobody else wrote: the copy in hand


async def test_checks_kicked_together_still_run_when_the_versions_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        rids = []
        for i in range(3):
            made = await sup.call("demo", "slow_compute", {"seconds": 3600, "label": f"{i}"})
            rids.append(made.receipt_id)
            await rec.check(made.receipt_id)

        def broken(ids: list[str]) -> dict[str, int]:
            raise StoreError("database is locked")

        monkeypatch.setattr(sup.store.receipts, "versions", broken)
        before = rec.checks
        rec.kick(rids, ObservationSource.POLL)  # does not raise: each check reads its own
        await rec.idle()
        assert rec.checks == before + 3
