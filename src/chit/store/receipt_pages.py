"""Pages of receipts for people (``chit receipts``, the TUI): newest status first.

Keyset pagination over the ended, live and work-ref indexes, and the lookup of one
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
_LIVE = [s.value for s in LifecycleState if not s.is_terminal]
_ENDED = [s.value for s in LifecycleState if s.is_terminal]
# Each repeats its partial index's WHERE term (SQLite uses a partial index only then).
_LIVE_FROM = "receipts INDEXED BY receipts_live WHERE active = 1"
_ENDED_FROM = "receipts INDEXED BY receipts_ended WHERE active = 0"


def _filtered(
    states: Sequence[str],
    server: str | None,
    work_ref: str,
    terms: Sequence[str],
    params: Sequence[Any],
    limit: int,
) -> tuple[str, list[Any]]:
    """One page filtered by work ref: walk ``receipts_by_work`` in order.

    ``INDEXED BY`` keeps the planner from taking ``receipts_ended`` for a state filter
    given beside it, which would walk every ended receipt.
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


def _kinds(states: Sequence[str]) -> builtins.list[tuple[str, builtins.list[str]]]:
    """Where the receipts in ``states`` are listed from: (``FROM … WHERE``, its parameters).

    Live receipts from ``receipts_live``, ended ones from ``receipts_ended`` (migration
    0012: no index holds every receipt by state). ``INDEXED BY``: the planner would
    otherwise walk the id's index, or the table, to avoid sorting the live ones.
    """
    kinds: builtins.list[tuple[str, builtins.list[str]]] = []
    for source, group in ((_LIVE_FROM, _LIVE), (_ENDED_FROM, _ENDED)):
        wanted = [s for s in group if s in states]
        if len(wanted) == len(group):
            kinds.append((source, []))
        elif wanted:
            kinds.append((f"{source} AND state IN ({', '.join('?' * len(wanted))})", wanted))
    return kinds


def _by_states(
    states: Sequence[str], terms: Sequence[str], params: Sequence[Any], limit: int
) -> tuple[str, list[Any]]:
    """One page over one or several states, newest status first.

    Ended receipts are a range of ``receipts_ended`` already in page order: at most
    ``limit`` entries are read, a state or server filter tested on each (the index
    carries both: no table read for one that does not match). Live receipts are the
    few the reconciler still polls: ``receipts_live`` holds all of them, read and
    sorted. A page over both kinds merges the two. A page stays a few short index reads
    however many ended receipts there are.
    """
    extra = "".join(f" AND {term}" for term in terms)
    kinds = _kinds(states)
    if len(kinds) == 1 and kinds[0][0].startswith(_ENDED_FROM):
        # Already in page order: the rows of the page are read as the range is walked.
        # Live receipts are sorted first, on their entries, and then only the page's
        # rows are read (below) — sorting rows with their documents read them all.
        source, wanted = kinds[0]
        sql = f"SELECT doc, status_at, receipt_id FROM {source}{extra}{_ORDER} LIMIT ?"
        return sql, [*wanted, *params, limit]
    arms = " UNION ALL ".join(
        f"SELECT * FROM (SELECT status_at, receipt_id FROM {source}{extra}{_ORDER} LIMIT ?)"
        for source, _ in kinds
    )
    sql = (
        "SELECT doc, status_at, receipt_id FROM receipts WHERE receipt_id IN"
        f" (SELECT receipt_id FROM ({arms}){_ORDER} LIMIT ?){_ORDER}"
    )
    args: list[Any] = []
    for _, wanted in kinds:
        args.extend([*wanted, *params, limit])
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

        One seek at the end of ``receipts_ended`` (ordered by status time) and a pass over
        the live receipts in ``receipts_live``, not a scan of every receipt.
        """
        row = fetch_one(
            self._db,
            f"SELECT max(newest) FROM (SELECT max(status_at) AS newest FROM {_ENDED_FROM}"
            f" UNION ALL SELECT max(status_at) FROM {_LIVE_FROM})",
        )
        return str(row[0]) if row is not None and row[0] is not None else None

    def observed_since(self, status_at: str | None, limit: int = 500) -> builtins.list[Receipt]:
        """Receipts observed at or after ``status_at`` (all when None), oldest first.

        Like :meth:`list` in the other direction: a short ascending range of
        ``receipts_ended`` and the live receipts of ``receipts_live``, merged.
        """
        since = "" if status_at is None else " AND status_at >= ?"
        arms = " UNION ALL ".join(
            f"SELECT * FROM (SELECT status_at, receipt_id FROM {source}{since}"
            " ORDER BY status_at, receipt_id LIMIT ?)"
            for source in (_LIVE_FROM, _ENDED_FROM)
        )
        args: builtins.list[Any] = []
        for _ in range(2):
            args.extend([status_at, limit] if status_at is not None else [limit])
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
        # One pass over each partial index's entries (they carry the state), no sort; one
        # statement, so both passes read the same snapshot.
        arms = ", ".join(
            f"(SELECT {', '.join('sum(state = ?)' for _ in group)} FROM {source})"
            for source, group in ((_LIVE_FROM, _LIVE), (_ENDED_FROM, _ENDED))
        )
        row = fetch_one(self._db, f"SELECT * FROM {arms}", [*_LIVE, *_ENDED])
        counts = dict.fromkeys(LifecycleState, 0)
        for state, n in zip([*_LIVE, *_ENDED], row or (), strict=False):
            counts[LifecycleState(state)] = int(n or 0)
        return counts
