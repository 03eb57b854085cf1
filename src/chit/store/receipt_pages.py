"""Pages of receipts for people (``chit receipts``, the TUI): newest status first.

Keyset pagination over the state, server and work-ref indexes, and the lookup of one
receipt by the id or prefix a person types; a mixin of
:class:`~chit.store.receipt_repo.ReceiptRepository` and of the read commands' reader
(:class:`~chit.store.reader.StoreReader`), so reads only through ``fetch_all`` and
``fetch_one``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from chit.receipts import LifecycleState, Receipt
from chit.store.db import fetch_all, fetch_one
from chit.store.errors import AmbiguousPrefix, RecordNotFound
from chit.store.paging import Page, decode_cursor, encode_cursor, like_pattern
from chit.store.receipt_rows import READ, parse

if TYPE_CHECKING:  # the read commands read without sqlite-utils (chit.store.reader)
    import sqlite_utils

_ORDER = " ORDER BY status_at DESC, receipt_id DESC"
_ALL_STATES = [s.value for s in LifecycleState]


def _filtered(
    states: Sequence[str],
    server: str | None,
    work_ref: str,
    terms: Sequence[str],
    params: Sequence[Any],
    limit: int,
) -> tuple[str, list[Any]]:
    """One page filtered by work ref: walk ``receipts_by_work`` in order.

    ``INDEXED BY`` keeps the planner from taking ``receipts_by_state`` for a state
    filter given beside it, which would sort every receipt in those states.
    """
    where = list(terms)
    args: list[Any] = list(params)
    if server is not None:
        where.insert(0, "server = ?")
        args.insert(0, server)
    where.insert(0, "work_ref = ?")
    args.insert(0, work_ref)
    if states:
        where.append(f"state IN ({', '.join('?' * len(states))})")
        args.extend(states)
    sql = (
        "SELECT doc, status_at, receipt_id FROM receipts INDEXED BY receipts_by_work"
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
    short index reads however many receipts there are. A server filter is one of the
    ``terms``: the index carries the server, so it is tested on the index entry and a
    receipt of another server costs no table read (migration 0008).
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


class ReceiptPages:
    """Listing, finding and counting receipts (mixed into ``ReceiptRepository``)."""

    _db: sqlite_utils.Database

    def get(self, receipt_id: str) -> Receipt | None:
        """Return the receipt with this exact id, or ``None``."""
        row = fetch_one(self._db, f"{READ} WHERE receipt_id = ?", [receipt_id])
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
            f"{READ} WHERE receipt_id >= ? AND receipt_id < ? ORDER BY receipt_id LIMIT 2",
            [prefix, prefix + "\U0010ffff"],
        )
        if not rows:
            raise RecordNotFound(f"no receipt starts with {prefix!r}")
        if len(rows) > 1:
            raise AmbiguousPrefix(f"{prefix!r} matches several receipts; type more of the id")
        return Receipt.model_validate_json(rows[0]["doc"])

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
        if work_ref is not None:
            sql, args = _filtered(states, server, work_ref, terms, params, limit + 1)
        else:
            if server is not None:
                terms.insert(0, "server = ?")
                params.insert(0, server)
            sql, args = _by_states(states or _ALL_STATES, terms, params, limit + 1)
        rows = fetch_all(self._db, sql, args)
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = encode_cursor(rows[-1]["status_at"], rows[-1]["receipt_id"]) if more else None
        return Page(items=parse(rows), next_cursor=cursor)

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
        return parse(rows)

    def counts_by_state(self) -> dict[LifecycleState, int]:
        """Return how many receipts are in each lifecycle state (all states present)."""
        counts = dict.fromkeys(LifecycleState, 0)
        for row in fetch_all(self._db, "SELECT state, count(*) AS n FROM receipts GROUP BY state"):
            counts[LifecycleState(row["state"])] = int(row["n"])
        return counts
