"""``chit receipts``, ``chit show`` and ``chit export``: reading the receipt store.

These commands never need the data key: receipts carry fingerprints, not handles, so
they work (read-only) while the key store is unavailable.
"""

from __future__ import annotations

import click

from chit import clock
from chit.cli.context import read_store
from chit.errors import UsageError
from chit.receipts import LifecycleState

STATES = [s.value for s in LifecycleState]


@click.command("receipts")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES),
    help="Filter by lifecycle state (repeatable).",
)
@click.option("--server", help="Only receipts of this server.")
@click.option("--work", "work_ref", help="Only receipts of this work record.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--all", "all_pages", is_flag=True, help="Every page, not only the first.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of receipts.")
@click.option("--jsonl", "as_jsonl", is_flag=True, help="One JSON receipt per line.")
@click.pass_context
def receipts(
    ctx: click.Context,
    states: tuple[str, ...],
    server: str | None,
    work_ref: str | None,
    limit: int,
    all_pages: bool,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """List receipts, most recently observed first."""
    from chit.cli.output import emit_json, emit_jsonl, receipt_json, receipt_table

    if as_json and as_jsonl:
        raise UsageError("choose one of --json and --jsonl")
    now = clock.now()
    selected = [LifecycleState(s) for s in states] or None
    items = []
    with read_store(ctx) as store:
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
        emit_json([receipt_json(r, now) for r in items])
    elif as_jsonl:
        emit_jsonl(receipt_json(r, now) for r in items)
    elif not items:
        click.echo("no receipts", err=True)
    else:
        for line in receipt_table(items, now):
            click.echo(line)


@click.command("show")
@click.argument("receipt")
@click.option("--json", "as_json", is_flag=True, help="The receipt and its timeline as JSON.")
@click.pass_context
def show(ctx: click.Context, receipt: str, as_json: bool) -> None:
    """Show one receipt (a unique id prefix is enough) with its timeline."""
    from chit.cli.output import emit_json, observation_json, receipt_detail, receipt_json

    now = clock.now()
    with read_store(ctx) as store:
        if store is None:
            from chit.store.errors import RecordNotFound

            raise RecordNotFound(f"no receipt starts with {receipt.strip()!r}")
        found = store.receipts.get_by_prefix(receipt)
        timeline = store.observations.timeline(found.receipt_id)
        unswept = store.rewriter.pending()
    if as_json:
        doc = receipt_json(found, now)
        doc["timeline"] = [observation_json(o) for o in timeline]
        emit_json(doc)
    else:
        for line in receipt_detail(found, timeline, now):
            click.echo(line)
    if unswept:
        _note_unswept()


@click.command("export")
@click.option(
    "--jsonl",
    "as_jsonl",
    is_flag=True,
    default=True,
    help="One JSON object per line (the default and only format).",
)
@click.option(
    "--timeline/--no-timeline",
    default=True,
    show_default=True,
    help="Include each receipt's observations.",
)
@click.pass_context
def export(ctx: click.Context, as_jsonl: bool, timeline: bool) -> None:
    """Export every receipt (fingerprints, never handles) as JSON Lines."""
    from chit.cli.output import emit_jsonl, observation_json, receipt_json

    now = clock.now()
    with read_store(ctx) as store:
        cursor: str | None = None
        while store is not None:
            page = store.receipts.list(limit=500, after=cursor)
            docs = []
            for r in page.items:
                doc = receipt_json(r, now)
                if timeline:
                    doc["timeline"] = [
                        observation_json(o) for o in store.observations.timeline(r.receipt_id)
                    ]
                docs.append(doc)
            emit_jsonl(docs)
            cursor = page.next_cursor
            if cursor is None:
                break
        if store is not None and store.rewriter.pending():
            _note_unswept()


def _note_unswept() -> None:
    """Say that rows from before redaction at the boundary are still as servers sent them."""
    click.echo(
        "chit: note: receipts written by an older chit may still quote what servers sent "
        "(task handles included); run a command that unlocks the data key once (e.g. "
        "`chit reconcile --once`) to redact them",
        err=True,
    )


COMMANDS = [receipts, show, export]
