"""The timeline of each receipt (table ``observations``): changes, not polls.

Rows are appended and their facts never change (a trigger enforces it). An observation
that is no news (``chit.receipts.is_news``) and says what the receipt's last row says
(same kind, status and message) is folded into that row instead: ``repeats`` counts it,
``last_at`` records when. A task polled every second for a day keeps one row per change.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from chit import clock
from chit.receipts import (
    LifecycleState,
    Observation,
    ObservationKind,
    ObservationSource,
    is_news,
)
from chit.store.db import fetch_all, immediate, write
from chit.store.errors import RecordNotFound

if TYPE_CHECKING:  # the read commands read without sqlite-utils (chit.store.reader)
    import sqlite_utils

# The next per-receipt sequence number is computed by the INSERT itself (an index lookup
# on the primary key) and handed back by RETURNING: one statement per row instead of a
# max(seq) query plus an insert.
_INSERT = (
    "INSERT INTO observations (receipt_id, seq, at, source, kind, status, message, applied,"
    " changes) SELECT :rid, coalesce(max(seq), 0) + 1, :at, :source, :kind, :status,"
    " :message, :applied, :changes FROM observations WHERE receipt_id = :rid RETURNING seq"
)


# Fold a repeat into the receipt's last row when that row says the same thing; the
# primary-key lookup of the last seq is the same one the insert makes.
_REPEAT = (
    "UPDATE observations SET repeats = repeats + :n, last_at = :at"
    " WHERE receipt_id = :rid"
    " AND seq = (SELECT max(seq) FROM observations WHERE receipt_id = :rid)"
    " AND kind = :kind AND status IS :status AND message IS :message RETURNING seq"
)


def _fold(
    db: sqlite_utils.Database, obs: Observation, times: int = 1, last: str | None = None
) -> int | None:
    """Count ``obs`` (``times`` times, the last at ``last``: default ``obs.at``) on the
    receipt's last row if it repeats it; its seq, or None."""
    cursor = write(
        db,
        _REPEAT,
        {
            "n": times,
            "rid": obs.receipt_id,
            "at": last if last is not None else clock.iso(obs.at),
            "kind": obs.kind,
            "status": obs.status,
            "message": obs.message,
        },
    )
    row = cursor.fetchone()
    cursor.close()
    return int(row[0]) if row is not None else None


# A new receipt's timeline: positional parameters (fewer binding look-ups per row).
_INSERT_NEW = (
    "INSERT INTO observations (receipt_id, seq, at, source, kind, status, message, applied,"
    " changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _row(obs: Observation) -> dict[str, object]:
    return {
        "rid": obs.receipt_id,
        "at": clock.iso(obs.at),
        # StrEnum members bind as their text: no ``.value`` lookups on the hot path.
        "source": obs.source,
        "kind": obs.kind,
        "status": obs.status,
        "message": obs.message,
        "applied": int(obs.applied),
        "changes": _changes_json(obs.changes),
    }


_CHANGES_JSON: dict[tuple[str, ...], str] = {(): "[]"}


def _changes_json(changes: tuple[str, ...]) -> str:
    # The same few field-name tuples recur on every write ("receipt" for a new one, the
    # freshness fields for a poll): encoded once each.
    text = _CHANGES_JSON.get(changes)
    if text is None:
        text = json.dumps(list(changes))
        if len(_CHANGES_JSON) < 256:
            _CHANGES_JSON[changes] = text
    return text


def append_rows(
    db: sqlite_utils.Database, observations: Iterable[Observation], *, new_receipt: bool = False
) -> list[int]:
    """Append observations inside the caller's transaction; return their sequence numbers.

    Sequence numbers are per receipt, gap-free and assigned under the write lock, so the
    timeline order is the commit order even across processes. ``new_receipt``: the
    receipt is being inserted in this transaction, so its timeline starts at 1 and
    needs no look-up (the receipt insert's unique keys have already proven it new). An
    observation that is no news and repeats the last row is folded into it (its seq is
    returned).
    """
    seqs: list[int] = []
    if new_receipt:
        for seq, obs in enumerate(observations, start=1):
            write(
                db,
                _INSERT_NEW,
                (
                    obs.receipt_id,
                    seq,
                    clock.iso(obs.at),
                    obs.source,
                    obs.kind,
                    obs.status,
                    obs.message,
                    int(obs.applied),
                    _changes_json(obs.changes),
                ),
            )
            seqs.append(seq)
        return seqs
    for obs in observations:
        if not is_news(obs):
            folded = _fold(db, obs)
            if folded is not None:
                seqs.append(folded)
                continue
        cursor = write(db, _INSERT, _row(obs))
        seqs.append(int(cursor.fetchone()[0]))
        cursor.close()  # a RETURNING statement stays open until its rows are read
    return seqs


_BUMP = (
    "UPDATE observations SET repeats = repeats + ?, last_at = ? WHERE receipt_id = ? AND seq = ?"
)


def append_repeated(
    db: sqlite_utils.Database, obs: Observation, extra: int, last_at: datetime | None
) -> int:
    """Append ``obs`` and ``extra`` repeats of it, the last at ``last_at``, inside the
    caller's transaction; return its seq.

    What ``append_rows`` would make of ``obs`` followed by ``extra`` copies (checks held
    in memory, ``chit.reconcile.behind``), in one statement when ``obs`` itself repeats
    the receipt's last row (the usual case: a poll that saw nothing new).
    """
    last = clock.iso(last_at) if extra and last_at is not None else None
    if not is_news(obs):
        folded = _fold(db, obs, 1 + extra, last)
        if folded is not None:
            return folded
    cursor = write(db, _INSERT, _row(obs))
    seq = int(cursor.fetchone()[0])
    cursor.close()
    if extra:
        write(db, _BUMP, (extra, last or clock.iso(obs.at), obs.receipt_id, seq))
    return seq


def row_to_observation(row: sqlite3.Row) -> Observation:
    """Rebuild an ``Observation`` from its row."""
    return Observation(
        receipt_id=row["receipt_id"],
        at=clock.parse_iso(row["at"]),
        source=ObservationSource(row["source"]),
        kind=ObservationKind(row["kind"]),
        status=LifecycleState(row["status"]) if row["status"] is not None else None,
        message=row["message"],
        applied=bool(row["applied"]),
        changes=tuple(json.loads(row["changes"])),
        repeats=int(row["repeats"]),
        last_at=clock.parse_iso(row["last_at"]) if row["last_at"] is not None else None,
    )


class ObservationRepository:
    """Append to and read the timeline; rows are never updated (a trigger enforces it)."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def append(self, *observations: Observation) -> list[int]:
        """Append one or more observations in one transaction.

        Returns:
            The per-receipt sequence number given to each observation.

        Raises:
            RecordNotFound: an observation names a receipt that does not exist.
        """
        try:
            with immediate(self._db):
                return append_rows(self._db, observations)
        except sqlite3.IntegrityError as exc:
            if "FOREIGN KEY" in str(exc):
                raise RecordNotFound("no such receipt for this observation") from exc
            raise

    def timeline(self, receipt_id: str) -> list[Observation]:
        """Return a receipt's observations in the order they were appended."""
        rows = fetch_all(
            self._db,
            "SELECT * FROM observations WHERE receipt_id = ? ORDER BY seq",
            [receipt_id],
        )
        return [row_to_observation(row) for row in rows]

    def count(self, receipt_id: str | None = None) -> int:
        """Count observations (of one receipt, or all)."""
        if receipt_id is None:
            rows = fetch_all(self._db, "SELECT count(*) FROM observations")
        else:
            rows = fetch_all(
                self._db, "SELECT count(*) FROM observations WHERE receipt_id = ?", [receipt_id]
            )
        return int(rows[0][0])
