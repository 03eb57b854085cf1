"""Intents (table ``intents``): a call is written *before* its request leaves.

A crash between send and reply then shows up as a ``sending`` intent on restart, which
``sending_to_unknown()`` turns into ``unknown`` — visible, never lost.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlite_utils

from chit import clock
from chit.errors import Conflict
from chit.receipts import Intent, IntentState
from chit.store.db import fetch_all, fetch_one, immediate, write
from chit.store.errors import AlreadyExists, RecordNotFound

_FIELDS = (
    "request_key, server, tool, args_digest, purpose, work_ref, state, receipt_id, attempts,"
    " error, created_at, updated_at"
)
_VALUES = (
    ":request_key, :server, :tool, :args_digest, :purpose, :work_ref, :state, :receipt_id,"
    " :attempts, :error, :created_at, :updated_at"
)
_UPSERT = (
    f"INSERT INTO intents ({_FIELDS}) VALUES ({_VALUES}) ON CONFLICT(request_key) DO UPDATE"
    " SET state = excluded.state, receipt_id = excluded.receipt_id, error = excluded.error,"
    " updated_at = excluded.updated_at"
)
RESTART_MESSAGE = "chit stopped before the server's reply arrived; outcome unknown"


def _params(intent: Intent) -> dict[str, Any]:
    return {
        "request_key": intent.request_key,
        "server": intent.server,
        "tool": intent.tool,
        "args_digest": intent.args_digest,
        "purpose": intent.purpose,
        "work_ref": intent.work_ref,
        "state": intent.state.value,
        "receipt_id": intent.receipt_id,
        "attempts": intent.attempts,
        "error": intent.error,
        "created_at": clock.iso(intent.created_at),
        "updated_at": clock.iso(intent.updated_at),
    }


def _row_to_intent(row: sqlite3.Row) -> Intent:
    return Intent(
        request_key=row["request_key"],
        server=row["server"],
        tool=row["tool"],
        args_digest=row["args_digest"],
        purpose=row["purpose"],
        work_ref=row["work_ref"],
        state=IntentState(row["state"]),
        receipt_id=row["receipt_id"],
        attempts=int(row["attempts"]),
        error=row["error"],
        created_at=clock.parse_iso(row["created_at"]),
        updated_at=clock.parse_iso(row["updated_at"]),
    )


def upsert_intent(db: sqlite_utils.Database, intent: Intent) -> None:
    """Insert or update an intent inside the caller's transaction (used on acceptance)."""
    write(db, _UPSERT, _params(intent))


class IntentRepository:
    """Typed access to intents; every write is one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def begin(self, intent: Intent, *, owner: str | None = None) -> Intent:
        """Record a call about to be sent; commit this *before* the request leaves.

        ``owner`` names the process sending it (see ``chit.runtime.owners``).

        Raises:
            AlreadyExists: the request key is taken (the message says whether the
                arguments differ — a reused key must never start a different call).
        """
        with immediate(self._db):
            row = fetch_one(
                self._db,
                "SELECT server, tool, args_digest, state FROM intents WHERE request_key = ?",
                [intent.request_key],
            )
            if row is not None:
                same = (row["server"], row["tool"], row["args_digest"]) == (
                    intent.server,
                    intent.tool,
                    intent.args_digest,
                )
                why = "already in use" if same else "reused with different arguments"
                raise AlreadyExists(
                    f"request key {intent.request_key} {why} (intent is {row['state']})"
                )
            write(self._db, f"INSERT INTO intents ({_FIELDS}) VALUES ({_VALUES})", _params(intent))
            if owner is not None:
                write(
                    self._db,
                    "UPDATE intents SET owner = ? WHERE request_key = ?",
                    [owner, intent.request_key],
                )
        return intent

    def mark(
        self,
        request_key: str,
        state: IntentState,
        *,
        error: str | None = None,
        receipt_id: str | None = None,
        bump_attempts: bool = False,
        expected: IntentState | tuple[IntentState, ...] | None = None,
        owner: str | None = None,
    ) -> Intent:
        """Move an intent to ``state`` (accepted intents are final).

        Args:
            request_key: the intent's key.
            state: the new state.
            error: a readable reason (rejected / unknown), cleared when ``None``.
            receipt_id: the receipt it became (normally set by ``record_acceptance``).
            bump_attempts: count one more send attempt (a resend under the same key).
            expected: the state(s) it may move from; another (a lost race) is a Conflict.
            owner: the process now sending it (kept when ``None``).

        Raises:
            RecordNotFound: no intent with that key.
            Conflict: the intent was already accepted and ``state`` differs, or it is
                not in an ``expected`` state.
        """
        allowed = (expected,) if isinstance(expected, IntentState) else expected
        with immediate(self._db):
            row = fetch_one(
                self._db, "SELECT state FROM intents WHERE request_key = ?", [request_key]
            )
            if row is None:
                raise RecordNotFound(f"no intent {request_key}")
            current = IntentState(row["state"])
            if current is IntentState.ACCEPTED and state is not IntentState.ACCEPTED:
                raise Conflict(f"intent {request_key} was accepted; it cannot become {state}")
            if allowed is not None and current not in allowed:
                raise Conflict(f"intent {request_key} is {current}; it cannot become {state}")
            write(
                self._db,
                "UPDATE intents SET state = ?, error = ?,"
                " receipt_id = coalesce(?, receipt_id), attempts = attempts + ?,"
                " owner = coalesce(?, owner), updated_at = ? WHERE request_key = ? AND state = ?",
                [
                    state.value,
                    error,
                    receipt_id,
                    int(bump_attempts),
                    owner,
                    clock.iso(),
                    request_key,
                    current.value,
                ],
            )
            updated = fetch_one(
                self._db, "SELECT * FROM intents WHERE request_key = ?", [request_key]
            )
        return _row_to_intent(updated)

    def sending_to_unknown(self) -> list[Intent]:
        """Restart rule: every ``sending`` intent becomes ``unknown``; return them.

        Run once at start-up, before any new request is sent.
        """
        with immediate(self._db):
            keys = [
                str(r["request_key"])
                for r in fetch_all(
                    self._db,
                    "SELECT request_key FROM intents WHERE state = ?",
                    [IntentState.SENDING.value],
                )
            ]
            write(
                self._db,
                "UPDATE intents SET state = ?, error = ?, updated_at = ? WHERE state = ?",
                [
                    IntentState.UNKNOWN.value,
                    RESTART_MESSAGE,
                    clock.iso(),
                    IntentState.SENDING.value,
                ],
            )
            rows = [
                fetch_one(self._db, "SELECT * FROM intents WHERE request_key = ?", [key])
                for key in keys
            ]
        return [_row_to_intent(row) for row in rows]

    def owners(self, state: IntentState = IntentState.SENDING) -> dict[str, str | None]:
        """The recorded sender of each intent in ``state`` (``None``: not recorded)."""
        rows = fetch_all(
            self._db, "SELECT request_key, owner FROM intents WHERE state = ?", [state.value]
        )
        return {str(r["request_key"]): r["owner"] for r in rows}

    def set_owner(self, request_key: str, owner: str) -> None:
        """Name the process that holds an intent's call (``chit.runtime.owners``)."""
        with immediate(self._db):
            write(
                self._db, "UPDATE intents SET owner = ? WHERE request_key = ?", [owner, request_key]
            )

    def owner_of(self, request_key: str) -> str | None:
        """The process recorded as holding an intent's call (None: not recorded)."""
        row = fetch_one(self._db, "SELECT owner FROM intents WHERE request_key = ?", [request_key])
        return row["owner"] if row is not None else None

    def get(self, request_key: str) -> Intent | None:
        """Return the intent with this key, or ``None``."""
        row = fetch_one(self._db, "SELECT * FROM intents WHERE request_key = ?", [request_key])
        return _row_to_intent(row) if row is not None else None

    def list(self, state: IntentState | None = None, limit: int = 1000) -> list[Intent]:
        """Return intents (optionally in one state), oldest first."""
        if state is None:
            rows = fetch_all(self._db, "SELECT * FROM intents ORDER BY created_at LIMIT ?", [limit])
        else:
            rows = fetch_all(
                self._db,
                "SELECT * FROM intents WHERE state = ? ORDER BY created_at LIMIT ?",
                [state.value, limit],
            )
        return [_row_to_intent(row) for row in rows]

    def counts_by_state(self) -> dict[IntentState, int]:
        """Return how many intents are in each state (all states present)."""
        counts = dict.fromkeys(IntentState, 0)
        for row in fetch_all(self._db, "SELECT state, count(*) AS n FROM intents GROUP BY state"):
            counts[IntentState(row["state"])] = int(row["n"])
        return counts
