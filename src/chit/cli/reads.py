"""``chit receipts`` and ``chit show`` without click: their parameters and their work.

``chit.cli.commands_receipts`` wraps these in click commands; ``chit.cli.entry`` calls
them directly for a plain command line. Neither needs the data key: receipts carry
fingerprints, not handles. A home without a store has no receipts, and saying so imports
neither the store nor the receipt models.
"""

from __future__ import annotations

from chit import clock
from chit.cli.context import read_store
from chit.cli.params import Param
from chit.cli.terminal import echo
from chit.errors import UsageError
from chit.home import resolve_home


def _states() -> list[str]:
    """The lifecycle states ``--state`` accepts (imported only when it is given)."""
    from chit.receipts.states import LifecycleState

    return [s.value for s in LifecycleState]


RECEIPTS = (
    Param(
        "--state",
        "states",
        kind="choice",
        choices=_states,
        multiple=True,
        help="Filter by lifecycle state (repeatable).",
    ),
    Param("--server", help="Only receipts of this server."),
    Param("--work", "work_ref", help="Only receipts of this work record."),
    Param("--limit", kind="int", bounds=(1, 1000), default=50, show_default=True),
    Param("--all", "all_pages", kind="flag", help="Every page, not only the first."),
    Param("--json", "as_json", kind="flag", help="A JSON array of receipts."),
    Param("--jsonl", "as_jsonl", kind="flag", help="One JSON receipt per line."),
)
"""The parameters of ``chit receipts``."""

SHOW = (
    Param("receipt", kind="argument"),
    Param("--json", "as_json", kind="flag", help="The receipt and its timeline as JSON."),
)
"""The parameters of ``chit show``."""


def list_receipts(
    home: str | None,
    *,
    states: tuple[str, ...],
    server: str | None,
    work_ref: str | None,
    limit: int,
    all_pages: bool,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """``chit receipts``: list receipts, most recently observed first.

    Args:
        home: ``--home`` (or ``$CHIT_HOME``), None for the default home.
        states: Only receipts in these lifecycle states (none: all).
        server: Only receipts of this server.
        work_ref: Only receipts of this work record.
        limit: Receipts per page.
        all_pages: Every page, not only the first.
        as_json: A JSON array.
        as_jsonl: One JSON object per line.

    Raises:
        UsageError: both ``as_json`` and ``as_jsonl``.
    """
    # Looked up at the call, not imported with this module: a test replaces them.
    from chit.cli import output

    if as_json and as_jsonl:
        raise UsageError("choose one of --json and --jsonl")
    now = clock.now()
    selected = None
    if states:
        from chit.receipts.states import LifecycleState

        selected = [LifecycleState(s) for s in states]
    items = []
    with read_store(resolve_home(home)) as store:
        cursor: str | None = None
        while store is not None:
            page = store.receipts.list(
                state=selected, server=server, work_ref=work_ref, limit=limit, after=cursor
            )
            items.extend(page.items)
            cursor = page.next_cursor
            if not all_pages or cursor is None:
                break
    if as_json:
        output.emit_json([output.receipt_json(r, now) for r in items])
    elif as_jsonl:
        output.emit_jsonl(output.receipt_json(r, now) for r in items)
    elif not items:
        echo("no receipts", err=True)
    else:
        for line in output.receipt_table(items, now):
            echo(line)


def show_receipt(home: str | None, *, receipt: str, as_json: bool) -> None:
    """``chit show``: one receipt (a unique id prefix is enough) with its timeline.

    Args:
        home: ``--home`` (or ``$CHIT_HOME``), None for the default home.
        receipt: The receipt's id or a unique prefix of it.
        as_json: The receipt and its timeline as JSON.

    Raises:
        RecordNotFound: no receipt starts with ``receipt``.
        AmbiguousPrefix: more than one does.
    """
    from chit.cli import output

    now = clock.now()
    with read_store(resolve_home(home)) as store:
        if store is None:
            from chit.store.errors import RecordNotFound

            raise RecordNotFound(f"no receipt starts with {receipt.strip()!r}")
        found = store.receipts.get_by_prefix(receipt)
        timeline = store.observations.timeline(found.receipt_id)
        unswept = store.rewriter.pending()
    if as_json:
        doc = output.receipt_json(found, now)
        doc["timeline"] = [output.observation_json(o) for o in timeline]
        output.emit_json(doc)
    else:
        for line in output.receipt_detail(found, timeline, now):
            echo(line)
    if unswept:
        note_unswept()


def note_unswept() -> None:
    """Say that rows from before redaction at the boundary are still as servers sent them."""
    echo(
        "chit: note: receipts written by an older chit may still quote what servers sent "
        "(task handles included); run a command that unlocks the data key once (e.g. "
        "`chit reconcile --once`) to redact them",
        err=True,
    )
