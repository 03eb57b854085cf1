"""Questions ``work_ask`` parks for a human, answered in chit (CLI or TUI).

A decision is a row in the sidecar store; the ``work_ask`` task waits until the row is
answered (or cancelled) and completes with the answer. Because the row is durable, a
question survives the asking agent's disconnect, and ``chit sidecar decide`` can answer
it from another process.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from chit import clock
from chit.errors import Conflict, NotFound, UsageError
from chit.home import Home
from chit.receipts.answers import validate_answer
from chit.sidecar.sql import (
    SidecarDb,
    exists,
    fetch_all,
    fetch_one,
    immediate,
    open_database,
    sidecar_target,
    write,
)


@dataclass(frozen=True)
class Decision:
    """One question and, once given, its answer."""

    id: str
    principal: str
    item_id: str
    question: str
    schema: dict[str, Any] | None
    state: str
    answer: Any
    created_at: str
    answered_at: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for ``--json``)."""
        return {
            "decision_id": self.id,
            "item_id": self.item_id,
            "question": self.question,
            "schema": self.schema,
            "state": self.state,
            "answer": self.answer,
            "created_at": self.created_at,
            "answered_at": self.answered_at,
        }


def _row(row: Any) -> Decision:
    return Decision(
        id=row["id"],
        principal=row["principal"],
        item_id=row["item_id"],
        question=row["question"],
        schema=json.loads(row["schema"]) if row["schema"] else None,
        state=row["state"],
        answer=json.loads(row["answer"]) if row["answer"] else None,
        created_at=row["created_at"],
        answered_at=row["answered_at"],
    )


def ask(
    db: SidecarDb,
    principal: str,
    item_id: str,
    question: str,
    schema: dict[str, Any] | None,
    *,
    decision_id: str | None = None,
) -> Decision:
    """Park a question (once per ``decision_id``); return the decision."""
    decision_id = decision_id or "dq_" + secrets.token_urlsafe(12)
    with immediate(db):
        write(
            db,
            "INSERT INTO decisions (id, principal, item_id, question, schema, state, created_at)"
            " VALUES (?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT(id) DO NOTHING",
            [
                decision_id,
                principal,
                item_id,
                question,
                json.dumps(schema) if schema is not None else None,
                clock.iso(),
            ],
        )
    found = get(db, decision_id)
    assert found is not None
    return found


def get(db: SidecarDb, decision_id: str) -> Decision | None:
    """One decision by id."""
    row = fetch_one(db, "SELECT * FROM decisions WHERE id = ?", [decision_id])
    return _row(row) if row is not None else None


def pending(db: SidecarDb, *, include_done: bool = False) -> list[Decision]:
    """Decisions waiting for an answer (oldest first), or all with ``include_done``."""
    where = "" if include_done else " WHERE state = 'pending'"
    rows = fetch_all(db, f"SELECT * FROM decisions{where} ORDER BY created_at")
    return [_row(r) for r in rows]


def _check_schema(schema: dict[str, Any] | None, answer: Any) -> None:
    """Check the answer against the question's form schema with the shared rules.

    The same ``validate_answer`` the TUI and ``chit answer`` use, so an answer given
    through ``chit sidecar decide`` is held to exactly the rules of one given in the TUI.
    """
    if not schema:
        return
    if schema.get("type") == "object":
        if not isinstance(answer, dict):
            raise UsageError("the answer must be a JSON object")
        problems = validate_answer(schema, answer)
        if problems:
            raise UsageError("invalid answer: " + "; ".join(problems))


def decide(db: SidecarDb, decision_id: str, answer: Any) -> Decision:
    """Answer a pending decision.

    Raises:
        NotFound: no such decision.
        Conflict: it was answered or cancelled already.
        UsageError: the answer does not fit the question's schema.
    """
    current = get(db, decision_id)
    if current is None:
        raise NotFound(f"no decision {decision_id}")
    _check_schema(current.schema, answer)
    with immediate(db):
        changed = write(
            db,
            "UPDATE decisions SET state = 'answered', answer = ?, answered_at = ?"
            " WHERE id = ? AND state = 'pending'",
            [json.dumps(answer), clock.iso(), decision_id],
        ).rowcount
    if not changed:
        raise Conflict(f"decision {decision_id} is already {current.state}")
    found = get(db, decision_id)
    assert found is not None
    return found


def cancel(db: SidecarDb, decision_id: str) -> bool:
    """Withdraw a pending question (its task was cancelled)."""
    with immediate(db):
        return (
            write(
                db,
                "UPDATE decisions SET state = 'cancelled', answered_at = ?"
                " WHERE id = ? AND state = 'pending'",
                [clock.iso(), decision_id],
            ).rowcount
            > 0
        )


# --- one call per question, for readers that hold no sidecar connection (the TUI) -----


def open_decisions(home: Home) -> list[Decision]:
    """Pending decisions of ``home``'s sidecar (oldest first); none when it has no sidecar.

    Opens and closes its own connection, so any thread may call it. A home that never
    ran the sidecar has no sidecar file, and reading must not create one.
    """
    target = sidecar_target(home)
    if not exists(target):
        return []
    db = open_database(target)
    try:
        return pending(db)
    finally:
        db.close()


def answer_decision(home: Home, decision_id: str, answer: Any) -> Decision:
    """:func:`decide` on ``home``'s sidecar store, on a connection of its own.

    Raises:
        NotFound: no such decision (or no sidecar store).
        Conflict: it was answered or cancelled already.
        UsageError: the answer does not fit the question's schema.
    """
    target = sidecar_target(home)
    if not exists(target):
        raise NotFound(f"no decision {decision_id}: this home has no sidecar store")
    db = open_database(target)
    try:
        return decide(db, decision_id, answer)
    finally:
        db.close()


def withdraw_decision(home: Home, decision_id: str) -> bool:
    """:func:`cancel` on ``home``'s sidecar store: the asking task ends as cancelled.

    Returns:
        False when the decision was no longer pending (or does not exist).
    """
    target = sidecar_target(home)
    if not exists(target):
        return False
    db = open_database(target)
    try:
        return cancel(db, decision_id)
    finally:
        db.close()
