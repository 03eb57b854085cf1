"""Rows written before redaction at the boundary are redacted once the vault is unlocked.

A store written by an older chit holds what servers sent verbatim: ``Task <id> not
found`` as a retrieval error and in the timeline, the id in a status message, a sealed
env value in an intent's error - and a receipt whose handle was wiped after the task
expired, which only its fingerprint can still identify. Migration 0006 marks the store;
the first Supervisor sweeps it; afterwards no byte of ``chit.db`` or its ``-wal`` holds
any of them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
from click.testing import CliRunner

from chit import clock
from chit.cli.main import cli
from chit.home import Home
from chit.receipts import (
    HandleRef,
    IntentState,
    LifecycleState,
    ObservationSource,
    RetrievalCondition,
    RetrievalFailed,
    StatusObserved,
    TaskProtocol,
    args_digest,
    new_intent,
    new_receipt_id,
    new_request_key,
    open_receipt,
)
from chit.reconcile import handle_aad
from chit.reconcile.writer import ReceiptWriter
from chit.redaction import REGISTRY
from chit.runtime import Supervisor
from chit.runtime.keys import unlock_vault
from chit.store import Store
from chit.store.rewrite import PENDING
from tests.engine_support import fast_options, file_key_env
from tests.leak_scenario import files
from tests.leak_support import leaks

HANDLES = ["Xq7-live-handle-0f3b9c2d", "Zz9-wiped-handle-77aa01bc"]
SECRET = "s3cr3t-token-value-9911"


def _old_store(home: Home) -> list[str]:
    """Write rows as chit did before the boundary: server text verbatim."""
    env = file_key_env(home.root)
    rids = []
    with Store.open(home.ensure()) as store:
        vault = unlock_vault(home, store, env)
        writer = ReceiptWriter(store)  # no redactor: the old behaviour
        now = clock.now()
        for handle in HANDLES:
            intent = new_intent(
                server="srv",
                tool="t",
                args_digest=args_digest({}),
                request_key=new_request_key(now),
                now=now,
            )
            rid = new_receipt_id(now)
            fp = vault.fingerprint(handle)
            tr = open_receipt(
                intent,
                receipt_id=rid,
                protocol=TaskProtocol.EXTENSION,
                created=StatusObserved(
                    status=LifecycleState.WORKING,
                    message=f"accepted as {handle}",
                    source=ObservationSource.CREATE,
                ),
                now=now,
                handle=HandleRef(fingerprint=fp, key_id=vault.kid.hex()),
            )
            store.intents.begin(intent)
            blob = vault.seal(handle, handle_aad(rid, "srv"))
            store.receipts.record_acceptance(intent, tr.receipt, tr.observation, blob, fp)
            writer.apply(
                rid,
                [
                    RetrievalFailed(
                        condition=RetrievalCondition.VANISHED,
                        message=f'lost: Task "{handle}" not found',
                    )
                ],
            )
            rids.append(rid)
        # The second task expired: its sealed handle is gone, only the fingerprint stays.
        store.db.execute(
            "UPDATE receipts SET handle_blob = NULL, handle_fp = NULL WHERE receipt_id = ?",
            [rids[1]],
        )
        store.db.conn.commit()
        refused = new_intent(
            server="srv", tool="t", args_digest="x", request_key=new_request_key(now), now=now
        )
        store.intents.begin(refused)
        store.intents.mark(
            refused.request_key, IntentState.REJECTED, error=f"401: bad token {SECRET}"
        )
    # As an older chit left it: migration 0006 not applied yet.
    conn = sqlite3.connect(home.db_path)
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0006_redaction_pending'")
    conn.execute("PRAGMA user_version=5")
    conn.commit()
    conn.close()
    return rids


def test_older_rows_are_swept_once(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    _old_store(home)
    before = files(home.root)
    assert leaks(before["chit.db"] + before.get("chit.db-wal", b""), HANDLES) == HANDLES
    home.config_path.write_text(
        '[servers.srv]\ntransport = "stdio"\ncommand = "true"\n'
        f'env = {{ API_TOKEN = "{SECRET}" }}\n'
    )
    with Store.open(home) as store:
        assert store.rewriter.pending()  # migration 0006 marked it
    # Until a process with the data key sweeps it, the readers say so.
    exported = CliRunner().invoke(cli, ["--home", str(home.root), "export"])
    assert exported.exit_code == 0 and "older chit may still quote" in exported.output

    async def main() -> None:
        async with Supervisor.open(
            home, environ=file_key_env(home.root), options=fast_options()
        ) as sup:
            assert not sup.store.rewriter.pending()
            after = files(home.root)
            for name, blob in after.items():
                assert not leaks(blob, [*HANDLES, SECRET]), name
            timeline = sup.store.observations.timeline(
                sup.store.receipts.list().items[0].receipt_id
            )
            assert any("task#" in (o.message or "") for o in timeline)

    anyio.run(main)
    REGISTRY.clear()
    for name, blob in files(home.root).items():
        assert not leaks(blob, [*HANDLES, SECRET]), name
    exported = CliRunner().invoke(cli, ["--home", str(home.root), "export"])
    assert "older chit" not in exported.output
    with Store.open(home) as store:
        assert store.meta.get(PENDING) is None
        receipts = store.receipts.list().items
        assert all("task#" in (r.retrieval_error or "") for r in receipts)
