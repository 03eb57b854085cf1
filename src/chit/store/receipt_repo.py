"""Receipts (table ``receipts``): written once accepted, updated with optimistic concurrency.

Data boundary: this repository never sees a plaintext task handle. It takes the sealed
blob (``bytes`` from the vault) and its short fingerprint, stores the blob in a BLOB column
and hands it back only through ``handle_blob()``; receipts read by ``get``/``list`` carry
the fingerprint (``Receipt.handle``), never the blob.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlite_utils

from chit import clock
from chit.errors import Conflict
from chit.receipts import Intent, IntentState, LifecycleState, Observation, Receipt
from chit.store.db import fetch_all, fetch_one, immediate, snapshot, write
from chit.store.errors import AlreadyExists, AmbiguousPrefix, RecordNotFound, StaleWrite
from chit.store.intent_repo import upsert_intent
from chit.store.observation_repo import append_rows
from chit.store.paging import Page, decode_cursor, encode_cursor, like_pattern

_COLUMNS = (
    "receipt_id, server, tool, purpose, work_ref, state, active, retrieval, acceptance,"
    " cancel_posture, accepted_at, status_at, next_check_at, expires_at, request_key,"
    " handle_blob, handle_fp, version, doc"
)
# Every write takes the next change number (see migration 0007): one index seek for the
# max, under the write lock, so numbers grow in commit order.
_NEXT_CHANGE = "(SELECT coalesce(max(change_seq), 0) + 1 FROM receipts)"
_INSERT = (
    f"INSERT INTO receipts ({_COLUMNS}, change_seq) VALUES (:receipt_id, :server, :tool,"
    " :purpose, :work_ref, :state, :active, :retrieval, :acceptance, :cancel_posture,"
    " :accepted_at, :status_at, :next_check_at, :expires_at, :request_key, :handle_blob,"
    f" :handle_fp, :version, :doc, {_NEXT_CHANGE})"
)
_UPDATE = (
    "UPDATE receipts SET server = :server, tool = :tool, purpose = :purpose,"
    " work_ref = :work_ref, state = :state, active = :active, retrieval = :retrieval,"
    " acceptance = :acceptance, cancel_posture = :cancel_posture, status_at = :status_at,"
    " next_check_at = :next_check_at, expires_at = :expires_at,"
    f" version = :version, doc = :doc, change_seq = {_NEXT_CHANGE}"
    " WHERE receipt_id = :receipt_id AND version = :expected"
    # The invariants ride in the WHERE clause (no read before every write): a terminal
    # state never changes, nor does the request key. A miss is explained by ``_refused``.
    " AND (active = 1 OR state = :state) AND request_key = :request_key"
)
# Everything but the sealed blob: list/get never load ciphertext they do not need.
_READ = "SELECT doc FROM receipts"
# Retrieval conditions asking again the same way cannot help: a person decides.
_LOST = "'vanished', 'expired', 'incompatible'"
# The reconciler's ranges. Each repeats its partial index's WHERE terms (SQLite uses a
# partial index only then); the ended-but-unretrieved arm names its index, because the
# planner would otherwise walk every completed or failed receipt in receipts_by_state.
_NO_BOUND = 2**63 - 1  # the largest change number SQLite can hold
_LIVE_NEVER = "active = 1 AND next_check_at IS NULL"
_LIVE_DUE = "active = 1 AND next_check_at <= ?1"
_UNRETRIEVED = (
    "receipts INDEXED BY receipts_unretrieved WHERE active = 0 AND next_check_at IS NOT NULL"
    " AND state IN ('completed', 'failed')"
)


def _iso(value: datetime | None) -> str | None:
    return clock.iso(value) if value is not None else None


def dump_doc(receipt: Receipt) -> str:
    """The stored document of a receipt: its JSON without the fields at their default.

    A left-out field reads back as its default, so nothing is lost while the defaults
    stay what they are — ``tests/test_write_path.py`` pins them: changing one needs a
    migration that writes the old value into the documents that left it out. A fresh
    receipt's row shrinks from 1.1 KB to 0.5 KB: twice as many rows per page, half the
    new pages per insert (docs/performance.md, "Store").
    """
    # The model's serializer called directly: ``model_dump_json`` only forwards to it
    # (with a dozen keyword defaults), once per receipt write.
    return _SERIALIZE(receipt, exclude_defaults=True).decode()


_SERIALIZE = Receipt.__pydantic_serializer__.to_json


def _params(receipt: Receipt) -> dict[str, Any]:
    # StrEnum members bind as their text; skipping ``.value`` is measurable per write.
    return {
        "receipt_id": receipt.receipt_id,
        "server": receipt.server,
        "tool": receipt.tool,
        "purpose": receipt.purpose,
        "work_ref": receipt.work_ref,
        "state": receipt.state,
        "active": 0 if receipt.is_terminal else 1,
        "retrieval": receipt.retrieval,
        "acceptance": receipt.acceptance.state,
        "cancel_posture": receipt.cancel.posture,
        "accepted_at": clock.iso(receipt.accepted_at),
        "status_at": clock.iso(receipt.status_at),
        "next_check_at": _iso(receipt.next_check_at),
        "expires_at": _iso(receipt.expires_at),
        "request_key": receipt.request_key,
        "handle_fp": receipt.handle.fingerprint if receipt.handle is not None else None,
        "version": receipt.version,
        "doc": dump_doc(receipt),
    }


def _check_handle(receipt: Receipt, handle_blob: bytes | None, handle_fp: str | None) -> None:
    # A str here would be a plaintext handle on its way into the file: refuse it loudly.
    if handle_blob is not None and not isinstance(handle_blob, bytes | bytearray):
        raise TypeError("handle_blob must be the sealed ciphertext (bytes), not plaintext")
    if (handle_blob is None) != (handle_fp is None):
        raise ValueError("handle_blob and handle_fp go together")
    if (
        receipt.handle is not None
        and handle_fp is not None
        and (receipt.handle.fingerprint != handle_fp)
    ):
        raise ValueError("handle_fp does not match receipt.handle.fingerprint")


def _parse(rows: Iterable[sqlite3.Row]) -> list[Receipt]:
    return [Receipt.model_validate_json(row["doc"]) for row in rows]


def _raise_duplicate(exc: sqlite3.IntegrityError, receipt: Receipt) -> None:
    text = str(exc)
    if "UNIQUE" in text and "request_key" in text:
        raise AlreadyExists(
            f"a receipt for request key {receipt.request_key} already exists"
        ) from exc
    if "UNIQUE" in text or "PRIMARY KEY" in text:
        raise AlreadyExists(f"receipt {receipt.receipt_id} already exists") from exc


_ORDER = " ORDER BY status_at DESC, receipt_id DESC"
_ALL_STATES = [s.value for s in LifecycleState]


def _filtered(
    states: Sequence[str],
    server: str | None,
    work_ref: str | None,
    terms: Sequence[str],
    params: Sequence[Any],
    limit: int,
) -> tuple[str, list[Any]]:
    """One page filtered by server or work ref: walk that filter's index in order.

    ``INDEXED BY`` keeps the planner from taking ``receipts_by_state`` for a state
    filter given beside it, which would sort every receipt in those states.
    """
    index = "receipts_by_server" if server is not None else "receipts_by_work"
    where = list(terms)
    args: list[Any] = list(params)
    if server is not None:
        where.insert(0, "server = ?")
        args.insert(0, server)
    if work_ref is not None:
        where.insert(0, "work_ref = ?")
        args.insert(0, work_ref)
    if states:
        where.append(f"state IN ({', '.join('?' * len(states))})")
        args.extend(states)
    sql = (
        f"SELECT doc, status_at, receipt_id FROM receipts INDEXED BY {index}"
        f" WHERE {' AND '.join(where)}{_ORDER} LIMIT ?"
    )
    return sql, [*args, limit]


def _by_states(
    states: Sequence[str], terms: Sequence[str], params: Sequence[Any], limit: int
) -> tuple[str, list[Any]]:
    """One page over one or several states, newest status first.

    Each state is a range of ``receipts_by_state`` already in page order, so a page is
    the merge of at most ``limit`` index entries per state — no index ordered by status
    alone is needed (one b-tree fewer on every receipt write), and a page stays a few
    short index reads however many receipts there are.
    """
    where = " AND ".join(["state = ?", *terms])
    arm = f"SELECT status_at, receipt_id FROM receipts WHERE {where}{_ORDER} LIMIT ?"
    if len(states) == 1:
        sql = f"SELECT doc, status_at, receipt_id FROM receipts WHERE {where}{_ORDER} LIMIT ?"
        return sql, [states[0], *params, limit]
    arms = " UNION ALL ".join(f"SELECT * FROM ({arm})" for _ in states)
    sql = (
        "SELECT doc, status_at, receipt_id FROM receipts WHERE receipt_id IN"
        f" (SELECT receipt_id FROM ({arms}){_ORDER} LIMIT ?){_ORDER}"
    )
    args: list[Any] = []
    for value in states:
        args.extend([value, *params, limit])
    return sql, [*args, limit]


class ReceiptRepository:
    """Typed access to receipts; every write is one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    # ----------------------------------------------------------------- writes
    def insert(
        self,
        receipt: Receipt,
        handle_blob: bytes | None,
        handle_fp: str | None,
        observations: Sequence[Observation] = (),
    ) -> Receipt:
        """Write a new receipt (and its first observations) in one transaction.

        Raises:
            AlreadyExists: the receipt id or its request key is already stored.
        """
        _check_handle(receipt, handle_blob, handle_fp)
        try:
            own = all(o.receipt_id == receipt.receipt_id for o in observations)
            with immediate(self._db):
                self._insert_row(receipt, handle_blob, handle_fp)
                append_rows(self._db, observations, new_receipt=own)
        except sqlite3.IntegrityError as exc:
            _raise_duplicate(exc, receipt)
            raise
        return receipt

    def record_acceptance(
        self,
        intent: Intent,
        receipt: Receipt,
        observation: Observation,
        handle_blob: bytes | None,
        handle_fp: str | None,
    ) -> Receipt:
        """The server accepted the call: write receipt, accepted intent and first observation.

        All three rows commit together or not at all, so a crash can never leave an
        accepted intent without its receipt, or a receipt without its timeline.

        Raises:
            AlreadyExists: a receipt for this request key or id already exists.
            ValueError: intent, receipt and observation do not belong together.
        """
        if intent.request_key != receipt.request_key:
            raise ValueError("intent and receipt have different request keys")
        if observation.receipt_id != receipt.receipt_id:
            raise ValueError("observation belongs to another receipt")
        _check_handle(receipt, handle_blob, handle_fp)
        accepted = intent.model_copy(
            update={
                "state": IntentState.ACCEPTED,
                "receipt_id": receipt.receipt_id,
                "updated_at": clock.now(),
                "error": None,
            }
        )
        try:
            with immediate(self._db):
                self._insert_row(receipt, handle_blob, handle_fp)
                upsert_intent(self._db, accepted)
                append_rows(self._db, [observation], new_receipt=True)
        except sqlite3.IntegrityError as exc:
            _raise_duplicate(exc, receipt)
            raise
        return receipt

    def _insert_row(self, receipt: Receipt, blob: bytes | None, fp: str | None) -> None:
        params = _params(receipt)
        params["handle_blob"] = bytes(blob) if blob is not None else None
        params["handle_fp"] = fp
        write(self._db, _INSERT, params)

    def update(
        self,
        receipt: Receipt,
        observations: Sequence[Observation] = (),
        expected_version: int | None = None,
        *,
        wipe_handle: bool = False,
    ) -> Receipt:
        """Replace a receipt if nobody changed it since ``expected_version``.

        The stored version becomes ``expected_version + 1`` (stamped into the returned
        model as well); the observations are appended in the same transaction.

        Args:
            receipt: the new receipt state.
            observations: timeline rows explaining the change.
            expected_version: the version the caller read (default ``receipt.version - 1``,
                the model's "bump on every applied change" convention).
            wipe_handle: erase the sealed handle (e.g. the task expired).

        Raises:
            StaleWrite: the stored version differs: re-read and re-apply.
            RecordNotFound: no such receipt.
            Conflict: the change would alter a terminal state or the request key.
        """
        expected = receipt.version - 1 if expected_version is None else expected_version
        stored = receipt.model_copy(update={"version": expected + 1})
        params = _params(stored)
        params["expected"] = expected
        with immediate(self._db):
            if write(self._db, _UPDATE, params).rowcount != 1:
                raise self._refused(stored, expected)
            if wipe_handle:
                write(
                    self._db,
                    "UPDATE receipts SET handle_blob = NULL, handle_fp = NULL WHERE receipt_id = ?",
                    [receipt.receipt_id],
                )
            append_rows(self._db, observations)
        return stored

    def _refused(self, stored: Receipt, expected: int) -> Exception:
        """Why the guarded UPDATE matched no row (read only when it did not)."""
        row = fetch_one(
            self._db,
            "SELECT version, state, request_key FROM receipts WHERE receipt_id = ?",
            [stored.receipt_id],
        )
        if row is None:
            return RecordNotFound(f"no receipt {stored.receipt_id}")
        if int(row["version"]) != expected:
            return StaleWrite(
                f"receipt {stored.receipt_id} changed (version {row['version']}, "
                f"expected {expected})"
            )
        old_state = LifecycleState(row["state"])
        if old_state.is_terminal and stored.state != old_state:
            return Conflict(f"receipt {stored.receipt_id} is {old_state}: terminal")
        return Conflict("a receipt's request key never changes")

    def delete(self, receipt_id: str) -> bool:
        """Delete a receipt and (cascade) its timeline; return whether it existed."""
        with immediate(self._db):
            cursor = write(self._db, "DELETE FROM receipts WHERE receipt_id = ?", [receipt_id])
            return cursor.rowcount > 0

    # ------------------------------------------------------------------ reads
    def get(self, receipt_id: str) -> Receipt | None:
        """Return the receipt with this exact id, or ``None``."""
        row = fetch_one(self._db, f"{_READ} WHERE receipt_id = ?", [receipt_id])
        return Receipt.model_validate_json(row["doc"]) if row is not None else None

    def require(self, receipt_id: str) -> Receipt:
        """Return the receipt with this exact id.

        Raises:
            RecordNotFound: no such receipt.
        """
        found = self.get(receipt_id)
        if found is None:
            raise RecordNotFound(f"no receipt {receipt_id}")
        return found

    def by_request_key(self, request_key: str) -> Receipt | None:
        """Return the receipt created for this request key (idempotent replays), or None."""
        row = fetch_one(self._db, f"{_READ} WHERE request_key = ?", [request_key])
        return Receipt.model_validate_json(row["doc"]) if row is not None else None

    def get_by_prefix(self, prefix: str) -> Receipt:
        """Resolve a short id typed by a user (an exact id always wins).

        Raises:
            RecordNotFound: nothing starts with ``prefix``.
            AmbiguousPrefix: several receipts start with ``prefix``.
        """
        prefix = prefix.strip()
        if not prefix:
            raise RecordNotFound("no receipt id given")
        exact = self.get(prefix)
        if exact is not None:
            return exact
        # A range on the primary key instead of LIKE: case-sensitive and index-only.
        rows = fetch_all(
            self._db,
            f"{_READ} WHERE receipt_id >= ? AND receipt_id < ? ORDER BY receipt_id LIMIT 2",
            [prefix, prefix + "\U0010ffff"],
        )
        if not rows:
            raise RecordNotFound(f"no receipt starts with {prefix!r}")
        if len(rows) > 1:
            raise AmbiguousPrefix(f"{prefix!r} matches several receipts; type more of the id")
        return Receipt.model_validate_json(rows[0]["doc"])

    def handle_blob(self, receipt_id: str) -> bytes | None:
        """Return the sealed handle of a receipt (``None`` if none or wiped).

        Raises:
            RecordNotFound: no such receipt.
        """
        row = fetch_one(
            self._db, "SELECT handle_blob FROM receipts WHERE receipt_id = ?", [receipt_id]
        )
        if row is None:
            raise RecordNotFound(f"no receipt {receipt_id}")
        blob = row["handle_blob"]
        return bytes(blob) if blob is not None else None

    def list(
        self,
        state: LifecycleState | Iterable[LifecycleState] | None = None,
        server: str | None = None,
        work_ref: str | None = None,
        text: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> Page[Receipt]:
        """Return one page of receipts, most recent status first (keyset pagination).

        Args:
            state: one lifecycle state or several.
            server: exact server name.
            work_ref: exact work reference.
            text: case-insensitive substring of id, server, tool, purpose or work ref
                (a scan of the rows the other filters leave).
            limit: page size (1–1000).
            after: ``Page.next_cursor`` of the previous page.

        Raises:
            UsageError: the cursor is not one this method produced.
        """
        limit = max(1, min(limit, 1000))
        if isinstance(state, LifecycleState):
            states = [state.value]
        elif state is not None:
            states = sorted({LifecycleState(s).value for s in state})
        else:
            states = []
        terms: builtins.list[str] = []
        params: builtins.list[Any] = []
        if text:
            pattern = like_pattern(text)
            cols = ("receipt_id", "server", "tool", "purpose", "work_ref")
            terms.append("(" + " OR ".join(f"{c} LIKE ? ESCAPE '\\'" for c in cols) + ")")
            params.extend([pattern] * len(cols))
        if after is not None:
            status_at, receipt_id = decode_cursor(after)
            terms.append("(status_at, receipt_id) < (?, ?)")
            params.extend([status_at, receipt_id])
        if server is not None or work_ref is not None:
            sql, args = _filtered(states, server, work_ref, terms, params, limit + 1)
        else:
            sql, args = _by_states(states or _ALL_STATES, terms, params, limit + 1)
        rows = fetch_all(self._db, sql, args)
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = encode_cursor(rows[-1]["status_at"], rows[-1]["receipt_id"]) if more else None
        return Page(items=_parse(rows), next_cursor=cursor)

    def newest_status_at(self) -> str | None:
        """The newest ``status_at`` of any receipt (ISO), None on an empty store.

        One index seek per state (``receipts_by_state`` is ordered by status time within
        each state), not a scan of every receipt.
        """
        arms = " UNION ALL ".join(
            "SELECT max(status_at) AS newest FROM receipts WHERE state = ?" for _ in _ALL_STATES
        )
        row = fetch_one(self._db, f"SELECT max(newest) FROM ({arms})", _ALL_STATES)
        return str(row[0]) if row is not None and row[0] is not None else None

    def observed_since(self, status_at: str | None, limit: int = 500) -> builtins.list[Receipt]:
        """Receipts observed at or after ``status_at`` (all when None), oldest first.

        Like :meth:`list` in the other direction: one short ascending range per state of
        ``receipts_by_state``, merged.
        """
        since = "" if status_at is None else " AND status_at >= ?"
        arm = (
            f"SELECT status_at, receipt_id FROM receipts WHERE state = ?{since}"
            " ORDER BY status_at, receipt_id LIMIT ?"
        )
        arms = " UNION ALL ".join(f"SELECT * FROM ({arm})" for _ in _ALL_STATES)
        args: builtins.list[Any] = []
        for value in _ALL_STATES:
            args.extend([value, status_at, limit] if status_at is not None else [value, limit])
        rows = fetch_all(
            self._db,
            "SELECT doc FROM receipts WHERE receipt_id IN (SELECT receipt_id FROM"
            f" ({arms}) ORDER BY status_at, receipt_id LIMIT ?)"
            " ORDER BY status_at, receipt_id",
            [*args, limit],
        )
        return _parse(rows)

    def counts_by_state(self) -> dict[LifecycleState, int]:
        """Return how many receipts are in each lifecycle state (all states present)."""
        counts = dict.fromkeys(LifecycleState, 0)
        for row in fetch_all(self._db, "SELECT state, count(*) AS n FROM receipts GROUP BY state"):
            counts[LifecycleState(row["state"])] = int(row["n"])
        return counts

    def due(self, now: datetime, limit: int = 100) -> builtins.list[Receipt]:
        """Non-terminal receipts whose next check is due (or was never scheduled), soonest first."""
        rows = fetch_all(
            self._db,
            f"SELECT doc, next_check_at FROM receipts WHERE {_LIVE_NEVER}"
            f" UNION ALL SELECT doc, next_check_at FROM receipts WHERE {_LIVE_DUE}"
            " ORDER BY next_check_at LIMIT ?",
            [clock.iso(now), limit],
        )
        return _parse(rows)

    def next_due_after(self, now: datetime) -> datetime | None:
        """The soonest check scheduled after ``now`` (None when nothing is scheduled later).

        What the reconciler sleeps until. Past-due receipts are left out: they are being
        checked, held after a failure, or waiting for a connection slot, and each of
        those wakes the loop on its own. One index probe per arm (``receipts_live``,
        ``receipts_unretrieved``).
        """
        keep = f" AND retrieval NOT IN ({_LOST})"
        row = fetch_one(
            self._db,
            "SELECT min(at) FROM ("
            "SELECT min(next_check_at) AS at FROM receipts WHERE active = 1"
            f" AND next_check_at > :now{keep}"
            f" UNION ALL SELECT min(next_check_at) AS at FROM {_UNRETRIEVED}"
            " AND next_check_at > :now)",
            {"now": clock.iso(now)},
        )
        at = row[0] if row is not None else None
        return clock.parse_iso(at) if at else None

    def due_ids(self, now: datetime, limit: int = 1000) -> builtins.list[str]:
        """Ids to check now, soonest first: live receipts past their next check (lost and
        incompatible ones excepted) and ended ones whose result is due to be fetched."""
        return [rid for rid, _ in self.due_checks(now, limit)]

    def due_checks(
        self, now: datetime, limit: int = 1000, *, after: str | None = None
    ) -> builtins.list[tuple[str, str | None]]:
        """(id, next check) of every receipt due now, as ``due_ids``, soonest first.

        ``after`` (a ``next_check_at`` an earlier scan handed out) skips what is due no
        later than it: a scan then reads only what became due since, not the whole
        backlog of checks still waiting for a connection slot. Receipts never scheduled
        are always included.

        One range per arm — never scheduled, due, unretrieved — on the two partial
        indexes (``receipts_live``, ``receipts_unretrieved``), so a scan reads what is
        due, not every live receipt.
        """
        since = "" if after is None else " AND next_check_at > :after"
        keep = f" AND retrieval NOT IN ({_LOST})"
        rows = fetch_all(
            self._db,
            f"SELECT receipt_id, next_check_at FROM receipts WHERE {_LIVE_NEVER}{keep}"
            " UNION ALL SELECT receipt_id, next_check_at FROM receipts WHERE active = 1"
            f" AND next_check_at <= :now{since}{keep}"
            f" UNION ALL SELECT receipt_id, next_check_at FROM {_UNRETRIEVED}"
            f" AND next_check_at <= :now{since} ORDER BY next_check_at LIMIT :limit",
            {"now": clock.iso(now), "after": after, "limit": limit},
        )
        return [(str(r[0]), r[1]) for r in rows]

    def live_ids(self) -> builtins.list[str]:
        """Every receipt that still needs the server: live (lost and incompatible ones
        excepted), or ended with its result still to fetch; soonest check first."""
        rows = fetch_all(
            self._db,
            "SELECT receipt_id, next_check_at FROM receipts WHERE active = 1"
            f" AND retrieval NOT IN ({_LOST})"
            f" UNION ALL SELECT receipt_id, next_check_at FROM {_UNRETRIEVED}"
            " ORDER BY next_check_at",
        )
        return [str(r["receipt_id"]) for r in rows]

    def live_handles(self) -> builtins.list[tuple[str, str, bytes]]:
        """(receipt id, server, sealed handle) of every live receipt that has a handle.

        What the reconciler needs to route hints and subscribe to pushes for every live
        task when it starts, without parsing a document per receipt.
        """
        rows = fetch_all(
            self._db,
            "SELECT receipt_id, server, handle_blob FROM receipts WHERE active = 1"
            " AND handle_blob IS NOT NULL",
        )
        return [(str(r[0]), str(r[1]), bytes(r[2])) for r in rows]

    def non_terminal(self) -> builtins.list[Receipt]:
        """Every receipt whose lifecycle is not terminal (the restart rule resumes them)."""
        with snapshot(self._db):
            rows = fetch_all(self._db, f"{_READ} WHERE active = 1 ORDER BY next_check_at")
        return _parse(rows)

    def change_cursor(self) -> int:
        """The newest change number (0 for an empty store): see migration 0007."""
        row = fetch_one(self._db, "SELECT max(change_seq) FROM receipts")
        return int(row[0]) if row is not None and row[0] is not None else 0

    def changed_since(
        self, cursor: int, limit: int, *, upto: int | None = None
    ) -> builtins.list[tuple[str, int]]:
        """Receipts written after change ``cursor`` (and not after ``upto``, when given):
        (id, change number), oldest first."""
        rows = fetch_all(
            self._db,
            "SELECT receipt_id, change_seq FROM receipts WHERE change_seq > ?"
            " AND change_seq <= ? ORDER BY change_seq LIMIT ?",
            [cursor, upto if upto is not None else _NO_BOUND, limit],
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    def count(self) -> int:
        """Total number of receipts."""
        return int(fetch_all(self._db, "SELECT count(*) FROM receipts")[0][0])
