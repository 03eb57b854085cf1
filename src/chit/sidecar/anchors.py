"""openWork and the follow-up queue: the sidecar store's request-side operations.

``open_work`` is seed 000's central transaction: the item id is issued, and the
provisional anchor and the start intent are written, in **one** ``BEGIN IMMEDIATE``
transaction, so no crash can leave an anchor that nothing will materialize. Follow-ups
(note, status, complete) are accepted while the anchor is provisional and queued in
``seq`` order; only a dead anchor refuses them, with the reason. The store's reads
(anchors, intents, ``inspect``) are in ``chit.sidecar.anchor_reads``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from chit import clock
from chit.sidecar.anchor_reads import AnchorReads, UnknownItem
from chit.sidecar.contract import ContractError, hashed, request_hash
from chit.sidecar.models import (
    DEAD_REASON,
    Anchor,
    Intent,
    Outcome,
    dead_outcome,
    intent_outcome,
    new_intent_id,
    new_item_id,
)
from chit.sidecar.sql import (
    SidecarDb,
    Target,
    fetch_one,
    immediate,
    open_database,
    quick_check,
    write,
)

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "IdempotencyConflict",
    "PresenceOf",
    "SidecarStore",
    "UnknownItem",
]

DEFAULT_MAX_ATTEMPTS = 8

_INSERT_ANCHOR = (
    "INSERT INTO anchors (item_id, principal, task_key, state, materialized, created_at,"
    " updated_at) VALUES (?, ?, ?, 'provisional', 0, ?, ?)"
)
_INSERT_INTENT = (
    "INSERT INTO intents (id, item_id, principal, kind, payload, idempotency_key,"
    " request_hash, seq, state, attempts, max_attempts, next_attempt_at, created_at,"
    " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)"
)

PresenceOf = Callable[[str], str | None]
"""``item_id -> "live" | "deleted" | "absent"``, or None when the library cannot tell."""


def _gone(presence: PresenceOf | None, item_id: str) -> bool:
    """True when the library says a live anchor's item was deleted (unknown: False)."""
    return presence is not None and presence(item_id) in ("deleted", "absent")


class IdempotencyConflict(ContractError):
    """An idempotency key was reused with different arguments (permanent)."""

    def __init__(self) -> None:
        super().__init__(
            "idempotency key reused with different arguments; use a new key for a new request"
        )


class SidecarStore(AnchorReads):
    """The anchors and intents of one sidecar store (one connection, one thread).

    The store is a SQLite file or a PostgreSQL database (``chit.sidecar.sql``).
    """

    def __init__(self, db: SidecarDb, path: Target) -> None:
        """Wrap an open, migrated connection (use :meth:`open`)."""
        self.db = db
        self.path = path

    @classmethod
    def open(cls, path: Target) -> SidecarStore:
        """Open (creating if needed) the sidecar store at ``path`` (a file or a URL)."""
        return cls(open_database(path), path)

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    def __enter__(self) -> SidecarStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def quick_check(self) -> list[str]:
        """Integrity check lines (``["ok"]`` when sound)."""
        return quick_check(self.db)

    # --- openWork -------------------------------------------------------------------

    def _replay(self, principal: str, key: str | None, kind: str, digest: str) -> Outcome | None:
        if key is None:
            return None
        row = fetch_one(
            self.db,
            "SELECT * FROM intents WHERE principal = ? AND idempotency_key = ?",
            [principal, key],
        )
        if row is None:
            return None
        existing = Intent.from_row(row)
        if existing.kind != kind or existing.request_hash != digest:
            raise IdempotencyConflict()
        anchor = self.anchor(existing.item_id)
        assert anchor is not None  # FK: an intent always has its anchor
        return intent_outcome(anchor, existing, replayed=True)

    def _kill(self, item_id: str, reason: str) -> None:
        write(
            self.db,
            "UPDATE anchors SET state = 'dead', dead_reason = ?, updated_at = ?"
            " WHERE item_id = ? AND state != 'dead'",
            [reason, clock.iso(), item_id],
        )

    def _insert_intent(
        self,
        anchor: Anchor,
        kind: str,
        payload: dict[str, Any],
        key: str | None,
        digest: str,
        max_attempts: int,
    ) -> Intent:
        """Queue a follow-up intent behind the item's earlier ones.

        The row is built here and returned as written, not read back: every column is
        known, and the read-backs (anchor and intent) were a third of openWork's CPU.
        """
        now = clock.iso()
        text = json.dumps(payload, ensure_ascii=False)
        seq = int(
            fetch_one(
                self.db,
                "SELECT coalesce(max(seq), 0) + 1 FROM intents WHERE item_id = ?",
                [anchor.item_id],
            )[0]
        )
        intent_id = new_intent_id()
        write(
            self.db,
            _INSERT_INTENT,
            (
                intent_id,
                anchor.item_id,
                anchor.principal,
                kind,
                text,
                key,
                digest,
                seq,
                max_attempts,
                now,
                now,
                now,
            ),
        )
        return Intent(
            id=intent_id,
            item_id=anchor.item_id,
            principal=anchor.principal,
            kind=kind,
            payload=json.loads(text),  # as a read would return it: not the caller's dict
            idempotency_key=key,
            request_hash=digest,
            seq=seq,
            state="pending",
            failure_class=None,
            error=None,
            attempts=0,
            max_attempts=max_attempts,
            next_attempt_at=now,
            created_at=now,
            updated_at=now,
        )

    def open_work(
        self,
        principal: str,
        task_key: str,
        title: str,
        *,
        purpose: str | None = None,
        idempotency_key: str | None = None,
        presence: PresenceOf | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> Outcome:
        """Issue an item id and queue its creation, or return the anchor already issued.

        Idempotent twice over: by ``idempotency_key`` (same key, same arguments → the same
        intent and item id) and by ``task_key`` (a provisional or live anchor for the task
        key is returned; a dead one is replaced by a new id).

        Raises:
            IdempotencyConflict: the key was used before with different arguments.
        """
        payload: dict[str, Any] = {"task_key": task_key, "title": title}
        if purpose is not None:
            payload["purpose"] = purpose
        digest, text = hashed("start", payload)
        with immediate(self.db):
            replay = self._replay(principal, idempotency_key, "start", digest)
            if replay is not None:
                return replay
            row = fetch_one(
                self.db,
                "SELECT * FROM anchors WHERE principal = ? AND task_key = ?"
                " AND state IN ('provisional', 'live') ORDER BY created_at DESC LIMIT 1",
                [principal, task_key],
            )
            if row is not None:
                found = Anchor.from_row(row)
                if found.state != "live" or not _gone(presence, found.item_id):
                    return self._describe(found, replayed=True)
                self._kill(found.item_id, DEAD_REASON)  # then issue a new id below
            # A new item: its anchor and start intent (seq 1, nothing queued before it),
            # written from what is known here — no model objects, no read-back, one clock
            # reading: openWork's Python was as much CPU as its SQL (docs/performance.md).
            at = clock.now()
            now = clock.iso(at)
            wall = at.timestamp()  # both ids stamped from the same reading
            item_id = new_item_id(wall)
            intent_id = new_intent_id(wall)
            write(self.db, _INSERT_ANCHOR, [item_id, principal, task_key, now, now])
            write(
                self.db,
                _INSERT_INTENT,
                (
                    intent_id,
                    item_id,
                    principal,
                    "start",
                    text,
                    idempotency_key,
                    digest,
                    1,
                    max_attempts,
                    now,
                    now,
                    now,
                ),
            )
        return Outcome(item_id, "queued", "provisional", False, intent_id=intent_id)

    def _describe(self, anchor: Anchor, *, replayed: bool) -> Outcome:
        """An anchor's state as a start answer: its start intent's, or applied when live."""
        if anchor.state == "live":
            return Outcome(
                anchor.item_id, "applied", "live", anchor.materialized, replayed=replayed
            )
        if anchor.state == "dead":
            return dead_outcome(anchor)
        row = fetch_one(
            self.db,
            "SELECT * FROM intents WHERE item_id = ? AND kind = 'start' ORDER BY seq LIMIT 1",
            [anchor.item_id],
        )
        if row is None:
            return Outcome(anchor.item_id, "queued", anchor.state, anchor.materialized)
        return intent_outcome(anchor, Intent.from_row(row), replayed=replayed)

    # --- follow-ups -------------------------------------------------------------------

    def enqueue(
        self,
        principal: str,
        item_id: str,
        kind: str,
        payload: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        presence: PresenceOf | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> Outcome:
        """Queue a note, status or completion for ``item_id`` behind its earlier intents.

        Accepted while the anchor is provisional (``queued`` is not failure); a dead
        anchor answers ``dead`` with its reason and stores nothing.

        Raises:
            UnknownItem: no such item for ``principal`` (identical for another's item).
            IdempotencyConflict: the key was used before with different arguments.
        """
        body = {"item_id": item_id, **payload}
        digest = request_hash(kind, body)
        with immediate(self.db):
            anchor = self.anchor(item_id, principal)
            if anchor is None:
                raise UnknownItem(item_id)
            replay = self._replay(principal, idempotency_key, kind, digest)
            if replay is not None:
                return replay
            if anchor.state == "live" and _gone(presence, item_id):
                self._kill(item_id, DEAD_REASON)
                anchor = self.anchor(item_id)
                assert anchor is not None
            if anchor.state == "dead":
                return dead_outcome(anchor)
            intent = self._insert_intent(
                anchor, kind, payload, idempotency_key, digest, max_attempts
            )
        return intent_outcome(anchor, intent)

    def kill(self, item_id: str, reason: str = DEAD_REASON) -> None:
        """Mark an anchor dead (the library item is gone); pending intents stay for the log."""
        with immediate(self.db):
            self._kill(item_id, reason)
