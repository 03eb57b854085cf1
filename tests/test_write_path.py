"""The narrower write path: its migrations keep every row, and the queries that replaced
dropped indexes answer exactly what the old ones did.

Store migration ``0004_write_path`` clusters the timeline and narrows the receipt
indexes; sidecar schema 2 clusters anchors and narrows the intents' indexes. Listing
without a state filter now merges the live and the ended receipts (0012), and the
reconciler's ranges use two partial indexes — both compared here with a brute-force
answer over the same rows.
"""

from __future__ import annotations

import enum
import itertools
import sqlite3
import typing
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils
from pydantic import BaseModel

from chit import clock
from chit.clock import ManualClock
from chit.home import Home
from chit.receipts import LifecycleState, Receipt, RetrievalCondition
from chit.reconcile.schedule import DueScan
from chit.sidecar import db as sidecar_db
from chit.sidecar.anchors import SidecarStore
from chit.store import AlreadyExists, Store
from chit.store.db import connect, immediate
from chit.store.migrations import SCHEMA_VERSION, migrations
from chit.store.receipt_repo import ReceiptRepository, dump_doc
from tests.sidecar_support import sqlite_db
from tests.store_support import T0, make_intent, make_obs, make_receipt

BLOB = b"\x01" + bytes(8) + bytes(12) + b"c" * 24
FP = "fp0123456789"
STATES = list(LifecycleState)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(Home(tmp_path / "home")) as opened:
        yield opened


# ------------------------------------------------------------------ store migration
def test_store_migration_keeps_timelines_and_rules(tmp_path: Path) -> None:
    path = tmp_path / "chit.db"
    db = connect(path)
    with immediate(db):
        migrations.apply(db, stop_before="0004_write_path")
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == 3
    for i in range(3):
        rid = f"r{i}"
        db.conn.execute(
            "INSERT INTO receipts (receipt_id, server, tool, state, active, retrieval,"
            " acceptance, cancel_posture, accepted_at, status_at, request_key, version, doc)"
            " VALUES (?, 'demo', 't', 'working', 1, 'fresh', 'pending', 'not_requested',"
            " ?, ?, ?, 1, ?)",
            [rid, "2026", "2026", f"rk{i}", make_receipt(rid).model_dump_json()],
        )
        for seq in (1, 2):
            db.conn.execute(
                "INSERT INTO observations (receipt_id, seq, at, source, kind, applied)"
                " VALUES (?, ?, '2026-01-01T00:00:00.000Z', 'poll', 'status', 1)",
                [rid, seq],
            )
    db.conn.commit()
    db.close()

    with Store.open_path(path) as migrated:
        assert migrated.schema_version == SCHEMA_VERSION
        assert migrated.observations.count() == 6
        assert [o.receipt_id for o in migrated.observations.timeline("r1")] == ["r1", "r1"]
        # New rows continue each timeline where it stopped.
        assert migrated.observations.append(make_obs("r1")) == [3]
        conn = migrated.db.conn
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("UPDATE observations SET message = 'x' WHERE receipt_id = 'r1'")
        # The timeline still needs its receipt.
        with pytest.raises(sqlite3.IntegrityError), immediate(migrated.db):
            conn.execute(
                "INSERT INTO observations (receipt_id, seq, at, source, kind, applied)"
                " VALUES ('ghost', 1, '2026', 'poll', 'status', 1)"
            )
        assert migrated.receipts.delete("r2")
        assert migrated.observations.count("r2") == 0  # still cascades
        indexes = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
        assert {"receipts_ended", "receipts_live"} <= indexes
        assert not {"receipts_by_status", "receipts_due", "receipts_by_server"} & indexes
        assert migrated.quick_check() == ["ok"]


def test_store_migration_serves_the_server_filter_from_the_state_index(
    tmp_path: Path,
) -> None:
    """0008 drops ``receipts_by_server``: an old file's receipts keep every row and list
    by server exactly as before, from the listing index (which carries the server)."""
    path = tmp_path / "chit.db"
    db = connect(path)
    with immediate(db):
        migrations.apply(db, stop_before="0008_one_listing_index")
    old = ReceiptRepository(db)
    made = []
    for i in range(60):
        r = make_receipt(
            f"r{i:03d}",
            state=STATES[i % len(STATES)],
            server=f"srv{i % 4}",
            status_at=T0 + timedelta(seconds=(i * 7) % 23),  # ties, broken by id
        )
        old.insert(r, BLOB, FP, [make_obs(r.receipt_id)])
        made.append(r)
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == 7
    db.close()

    with Store.open_path(path) as migrated:
        assert migrated.schema_version == SCHEMA_VERSION
        conn = migrated.db.conn
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "receipts_by_server" not in indexes
        # 0012 then moved the listing to receipts_ended, which carries the server too.
        columns = [r[2] for r in conn.execute("PRAGMA index_info(receipts_ended)")]
        assert columns == ["status_at", "receipt_id", "state", "server", "active"]
        assert [migrated.receipts.get(r.receipt_id) for r in made] == made
        assert migrated.observations.count() == 60
        for server in ("srv1", "srv3", "nobody"):
            assert _pages(migrated, 4, server=server) == _expected(
                made, lambda r, s=server: r.server == s
            )
        working = LifecycleState.WORKING
        assert _pages(migrated, 2, server="srv0", state=working) == _expected(
            made, lambda r: r.server == "srv0" and r.state == working
        )
        assert migrated.receipts.counts_by_state() == dict.fromkeys(LifecycleState, 12)
        assert migrated.quick_check() == ["ok"]


def test_store_migration_makes_the_request_key_the_id_and_keeps_every_row(
    tmp_path: Path,
) -> None:
    """0009 rebuilds ``receipts`` without the request key's UNIQUE index: an old file keeps
    its receipts, their timelines (the drop must not cascade) and the intents pointing at
    them; old keys are still found and still unique, and new receipts (id = request key)
    cannot take a key an old receipt holds, nor the other way round."""
    path = tmp_path / "chit.db"
    db = connect(path)
    with immediate(db):
        migrations.apply(db, stop_before="0009_request_key_is_id")
    old = ReceiptRepository(db)
    made = [make_receipt(f"r{i}", request_key=f"rk{i}") for i in range(5)]
    for r in made:
        old.insert(r, BLOB, FP, [make_obs(r.receipt_id), make_obs(r.receipt_id)])
    Store(db, path, 8).intents.begin(make_intent("rk9"))
    with immediate(db):
        db.conn.execute("UPDATE intents SET receipt_id = 'r1' WHERE request_key = 'rk9'")
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == 8
    db.close()

    with Store.open_path(path) as migrated:
        assert migrated.schema_version == SCHEMA_VERSION
        conn = migrated.db.conn
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "sqlite_autoindex_receipts_2" not in indexes
        assert {"receipts_ended", "receipts_by_request_key"} <= indexes
        assert [migrated.receipts.get(r.receipt_id) for r in made] == made
        assert migrated.observations.count() == 10  # the rebuild did not cascade
        linked = migrated.intents.get("rk9")
        assert linked is not None and linked.receipt_id == "r1"  # nor set the link to NULL
        assert migrated.receipts.by_request_key("rk3") == made[3]
        assert migrated.receipts.by_request_key("r3") is None
        # A new receipt: its id is its request key, found by it.
        new = make_receipt("K1", request_key="K1")
        migrated.receipts.insert(new, BLOB, FP, [make_obs("K1")])
        assert migrated.receipts.by_request_key("K1") == new
        # Request keys stay unique across old and new receipts, both ways round.
        for clash in (
            make_receipt("rk2", request_key="rk2"),  # a new id = an old receipt's key
            make_receipt("r9", request_key="K1"),  # an old-style key = a new receipt's id
            make_receipt("r8", request_key="rk4"),  # two old-style keys
            make_receipt("K1", request_key="K1"),  # two new receipts
        ):
            with pytest.raises(AlreadyExists):
                migrated.receipts.insert(clash, BLOB, FP, [make_obs(clash.receipt_id)])
        assert migrated.receipts.delete("r2")
        assert migrated.observations.count("r2") == 0  # the timeline still cascades
        with pytest.raises(sqlite3.IntegrityError), immediate(migrated.db):
            conn.execute(
                "INSERT INTO observations (receipt_id, seq, at, source, kind, applied)"
                " VALUES ('ghost', 1, '2026', 'poll', 'status', 1)"
            )
        assert migrated.quick_check() == ["ok"]


def test_a_new_receipt_writes_no_request_key_index_entry(store: Store) -> None:
    """The receipt written as chit writes it (id = request key) is in no request-key index:
    the primary key serves the look-up; the partial index holds only older receipts."""
    r = make_receipt("K7", request_key="K7")
    store.receipts.insert(r, BLOB, FP, [make_obs("K7")])
    conn = store.db.conn
    assert (
        conn.execute(
            "SELECT count(*) FROM receipts INDEXED BY receipts_by_request_key"
            " WHERE request_key <> receipt_id"
        ).fetchone()[0]
        == 0
    )
    plan = " ".join(
        str(row[3])
        for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT doc FROM receipts WHERE request_key = :k"
            " AND request_key <> receipt_id",
            {"k": "K7"},
        )
    )
    assert "receipts_by_request_key" in plan
    assert store.receipts.by_request_key("K7") == r


# ---------------------------------------------------------------- sidecar migration
def _sidecar_v1(path: Path) -> sqlite_utils.Database:
    db = connect(path)
    with immediate(db):
        sidecar_db.MIGRATIONS[0](db)
        db.conn.execute("PRAGMA user_version=1")
    return db


def test_sidecar_migration_keeps_anchors_and_intents(tmp_path: Path) -> None:
    path = tmp_path / "sidecar.db"
    db = _sidecar_v1(path)
    with immediate(db):
        db.conn.execute(
            "INSERT INTO anchors (item_id, principal, task_key, state, materialized,"
            " created_at, updated_at) VALUES ('wi_old', 'local', 'tk', 'live', 1, 'a', 'a')"
        )
        for seq, key in ((1, "k1"), (2, None), (3, None)):
            db.conn.execute(
                "INSERT INTO intents (id, item_id, principal, kind, payload, idempotency_key,"
                " request_hash, seq, state, max_attempts, next_attempt_at, created_at,"
                " updated_at) VALUES (?, 'wi_old', 'local', 'note', '{}', ?, 'h', ?,"
                " 'applied', 8, 'a', 'a', 'a')",
                [f"in_{seq}", key, seq],
            )
    db.close()

    with SidecarStore.open(path) as side:
        side_db = sqlite_db(side)
        conn = side_db.conn
        assert conn.execute("PRAGMA user_version").fetchone()[0] == sidecar_db.SCHEMA_VERSION
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        anchor = side.anchor("wi_old")
        assert anchor is not None and anchor.state == "live" and anchor.materialized
        assert [i.seq for i in side.intents_of("wi_old")] == [1, 2, 3]
        # Replays by key still find the old intent; a follow-up continues the sequence.
        out = side.enqueue("local", "wi_old", "note", {"text": "x"}, idempotency_key="k2")
        assert [i.seq for i in side.intents_of("wi_old")][-1] == 4 and out.intent_id
        with immediate(side_db), pytest.raises(sqlite3.IntegrityError):  # keys stay unique
            conn.execute(
                "INSERT INTO intents (id, item_id, principal, kind, payload, idempotency_key,"
                " request_hash, seq, state, max_attempts, next_attempt_at, created_at,"
                " updated_at) VALUES ('in_x', 'wi_old', 'local', 'note', '{}', 'k1', 'h', 9,"
                " 'pending', 8, 'a', 'a', 'a')"
            )
        with immediate(side_db), pytest.raises(sqlite3.IntegrityError):  # FK enforced
            conn.execute(
                "INSERT INTO intents (id, item_id, principal, kind, payload, request_hash,"
                " seq, state, max_attempts, next_attempt_at, created_at, updated_at) VALUES"
                " ('in_y', 'wi_ghost', 'local', 'note', '{}', 'h', 1, 'pending', 8, 'a',"
                " 'a', 'a')"
            )
        assert (
            conn.execute("SELECT count(*) FROM intents WHERE idempotency_key IS NULL").fetchone()[0]
            == 2
        )  # several intents without a key are fine
        assert side.quick_check() == ["ok"]
    SidecarStore.open(path).close()  # reopening a current file changes nothing


def test_sidecar_migration_folds_the_anchor_indexes(tmp_path: Path) -> None:
    """Schema 3: one anchor index serves the task-key lookup, the sweeps and the counts
    of a file written by schema 2, with every anchor kept."""
    path = tmp_path / "sidecar.db"
    db = connect(path)
    with immediate(db):
        sidecar_db.MIGRATIONS[0](db)
        sidecar_db.MIGRATIONS[1](db)
        db.conn.execute("PRAGMA user_version=2")
        states = ("provisional", "live", "dead")
        for i in range(12):
            db.conn.execute(
                "INSERT INTO anchors (item_id, principal, task_key, state, materialized,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, 1, ?, ?)",
                [
                    f"wi_{i:02d}",
                    f"p{i % 2}",
                    f"tk{i % 4}",
                    states[i % 3],
                    f"c{i:02d}",
                    f"u{(i * 5) % 12:02d}",
                ],
            )
    db.close()

    with SidecarStore.open(path) as side:
        assert isinstance(side.db, sqlite_utils.Database)
        conn = side.db.conn
        assert conn.execute("PRAGMA user_version").fetchone()[0] == sidecar_db.SCHEMA_VERSION
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "anchors_by_task" not in indexes and "anchors_by_state" in indexes
        assert len(side.anchors()) == 12
        live = side.anchors(state="live")
        assert [a.item_id for a in live] == ["wi_10", "wi_01", "wi_04", "wi_07"]  # by update
        assert [a.updated_at for a in side.anchors(limit=3)] == ["u00", "u01", "u02"]
        # open_work finds the newest provisional or live anchor of a principal's task
        # key (p1/tk1: wi_01 live, wi_05 dead, wi_09 provisional) instead of a new id.
        assert side.open_work("p1", "tk1", "T").item_id == "wi_09"
        assert side.open_work("p0", "tk0", "T").item_id == "wi_04"  # wi_08 is dead
        fresh = side.open_work("p0", "tk9", "T")
        assert not fresh.replayed and fresh.item_id not in {a.item_id for a in live}
        assert side.quick_check() == ["ok"]


def test_sidecar_ids_sort_by_creation(tmp_path: Path) -> None:
    with SidecarStore.open(tmp_path / "sidecar.db") as side:
        items = [side.open_work("local", f"t{i}", "T").item_id for i in range(3)]
    assert all(i.startswith("wi_") and len(i) == 3 + 11 + 32 for i in items)
    stamps = [item[3:14] for item in items]
    assert stamps == sorted(stamps)
    assert len({item[14:] for item in items}) == 3


# ----------------------------------------------------------- listing by merged ranges
def _fill(store: Store, n: int) -> list[Receipt]:
    made = []
    with immediate(store.db):
        for i in range(n):
            r = make_receipt(
                f"r{i:04d}",
                state=STATES[(i * 7) % len(STATES)],
                server=f"srv{i % 3}",
                purpose="needle" if i % 11 == 0 else "hay",
                status_at=T0 + timedelta(seconds=(i * 13) % 97),  # many ties
            )
            store.receipts.insert(r, BLOB, FP)
            made.append(r)
    return made


def _pages(store: Store, limit: int, **filters: object) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = store.receipts.list(limit=limit, after=cursor, **filters)  # type: ignore[arg-type]
        ids += [r.receipt_id for r in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return ids


def _expected(made: list[Receipt], keep: object) -> list[str]:
    chosen = [r for r in made if keep(r)]  # type: ignore[operator]
    chosen.sort(key=lambda r: (r.status_at, r.receipt_id), reverse=True)
    return [r.receipt_id for r in chosen]


def test_merged_state_ranges_list_like_one_index(store: Store) -> None:
    made = _fill(store, 400)
    assert _pages(store, 7) == _expected(made, lambda r: True)
    for pair in itertools.combinations(STATES, 2):
        wanted = set(pair)
        assert _pages(store, 13, state=list(pair)) == _expected(
            made, lambda r, w=wanted: r.state in w
        )
    assert _pages(store, 5, text="needle") == _expected(made, lambda r: r.purpose == "needle")
    live = [LifecycleState.WORKING, LifecycleState.INPUT_REQUIRED]
    assert _pages(store, 9, state=live, server="srv1") == _expected(
        made, lambda r: r.state in live and r.server == "srv1"
    )
    assert _pages(store, 50, state=[]) == _expected(made, lambda r: True)  # no state = all
    # A server filter alone, or with one state: the state index's server, tested per entry.
    assert _pages(store, 11, server="srv2") == _expected(made, lambda r: r.server == "srv2")
    failed = LifecycleState.FAILED
    assert _pages(store, 3, server="srv0", state=failed) == _expected(
        made, lambda r: r.server == "srv0" and r.state == failed
    )
    assert _pages(store, 8, server="srv1", text="needle") == _expected(
        made, lambda r: r.server == "srv1" and r.purpose == "needle"
    )
    # The TUI's marks: the newest status time, and what was observed since one.
    ordered = sorted(made, key=lambda r: (r.status_at, r.receipt_id))
    assert store.receipts.newest_status_at() == clock.iso(ordered[-1].status_at)
    assert [r.receipt_id for r in store.receipts.observed_since(None, 30)] == [
        r.receipt_id for r in ordered[:30]
    ]
    cut = ordered[200].status_at
    assert [r.receipt_id for r in store.receipts.observed_since(clock.iso(cut), 1000)] == [
        r.receipt_id for r in ordered if r.status_at >= cut
    ]


# ---------------------------------------------------------------- reconciler ranges
def test_due_and_live_ids_by_partial_indexes(store: Store) -> None:
    now = T0 + timedelta(minutes=10)
    soon, later = now - timedelta(seconds=1), now + timedelta(minutes=5)
    cases = {
        "live-due": (LifecycleState.WORKING, soon, RetrievalCondition.FRESH, True, True),
        "live-never": (LifecycleState.INPUT_REQUIRED, None, RetrievalCondition.STALE, True, True),
        "live-later": (LifecycleState.WORKING, later, RetrievalCondition.FRESH, False, True),
        "live-lost": (LifecycleState.WORKING, soon, RetrievalCondition.VANISHED, False, False),
        "done-fetch": (LifecycleState.COMPLETED, soon, RetrievalCondition.FRESH, True, True),
        "failed-later": (LifecycleState.FAILED, later, RetrievalCondition.FRESH, False, True),
        "done-fetched": (LifecycleState.COMPLETED, None, RetrievalCondition.FRESH, False, False),
        "cancelled": (LifecycleState.CANCELLED, soon, RetrievalCondition.FRESH, False, False),
    }
    for rid, (state, check, retrieval, _, _) in cases.items():
        r = make_receipt(rid, state=state, next_check_at=check)
        store.receipts.insert(r.model_copy(update={"retrieval": retrieval}), BLOB, FP)
    due = store.receipts.due_ids(now)
    assert set(due) == {rid for rid, c in cases.items() if c[3]}
    assert due[0] == "live-never"  # never scheduled sorts first: due at once
    assert set(store.receipts.live_ids()) == {rid for rid, c in cases.items() if c[4]}
    assert store.receipts.due_ids(now, limit=2) == due[:2]
    assert {r.receipt_id for r in store.receipts.due(now)} == {
        "live-due",
        "live-never",
        "live-lost",
    }


# ---------------------------------------------------------------- the stored document
def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    if model in seen:
        return seen
    seen.add(model)
    for info in model.model_fields.values():
        stack = [info.annotation]
        while stack:
            tp = stack.pop()
            stack.extend(typing.get_args(tp))
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                _models(tp, seen)
    return seen


#: The defaults a stored document relies on (``dump_doc`` leaves these values out).
#: Changing one changes every stored receipt that left it out: add a migration that
#: writes the old value into those documents first, then update this table.
PINNED_DEFAULTS = {
    "Acceptance": {"state": "pending"},
    "CancelInfo": {"completed_despite_cancel": False, "posture": "not_requested"},
    "InputRequest": {"answer_status": "pending", "kind": "elicitation"},
    "Outcome": {"is_error": False, "summary": ""},
    "Receipt": {
        "acceptance": {"state": "pending"},
        "cancel": {"completed_despite_cancel": False, "posture": "not_requested"},
        "input_requests": [],
        "retained": "argument digest, result digest and a bounded summary",
        "retrieval": "fresh",
        "retrieval_failures": 0,
        "synchronous": False,
        "version": 1,
    },
}


def _defaults(model: type[BaseModel]) -> dict[str, object]:
    found: dict[str, object] = {}
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        value = info.get_default(call_default_factory=True)
        if isinstance(value, BaseModel):
            value = {k: v for k, v in value.model_dump(mode="json").items() if v is not None}
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, enum.Enum):
            value = value.value
        if value is not None:
            found[name] = value
    return found


def test_the_document_leaves_out_defaults_that_stay_put() -> None:
    """``dump_doc`` leaves out every field at its default: each must read back as it was,
    so every nullable field defaults to None and the other defaults are pinned."""
    models = _models(Receipt, set())
    assert {"Receipt", "CancelInfo", "Acceptance", "Outcome", "InputRequest"} <= {
        m.__name__ for m in models
    }
    for model in models:
        for name, info in model.model_fields.items():
            if type(None) in typing.get_args(info.annotation):
                assert not info.is_required(), f"{model.__name__}.{name}"
                assert info.default is None, f"{model.__name__}.{name}"
        assert _defaults(model) == PINNED_DEFAULTS.get(model.__name__, {}), model.__name__
    sparse = make_receipt("r-1", purpose=None, fingerprint=None)
    doc = dump_doc(sparse)
    assert "null" not in doc and len(doc) < len(sparse.model_dump_json()) / 2
    assert Receipt.model_validate_json(doc) == sparse


# ------------------------------------------------------------- the schedule, read by ticks
def test_a_tick_reads_only_what_became_due_since_the_last(store: Store) -> None:
    clock = ManualClock(T0)
    for i in range(3):
        at = T0 + timedelta(seconds=i + 1)
        store.receipts.insert(make_receipt(f"r{i}", next_check_at=at), BLOB, FP)
    scan = DueScan(store, clock)
    assert scan.due() == []  # the first read is a full one: nothing due yet
    clock.advance(2.0)
    assert scan.due() == ["r0", "r1"]  # due; their checks wait for a slot (a backlog)
    assert scan.due() == []  # the next tick does not read the backlog again
    clock.advance(0.5)
    assert scan.due() == []
    clock.advance(0.6)  # r2 became due, and a full read is due as well
    assert scan.due() == ["r0", "r1", "r2"]
    store.receipts.insert(make_receipt("never"), BLOB, FP)  # never scheduled: always due
    assert scan.due() == ["never"]
