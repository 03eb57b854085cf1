"""``chit receipts``, ``chit show`` and ``chit export``: reading the receipt store.

These commands never need the data key: receipts carry fingerprints, not handles, so
they work (read-only) while the key store is unavailable.
"""

from __future__ import annotations

from typing import Any

import click

from chit import clock
from chit.cli.context import home_of, home_option, read_store
from chit.cli.params import click_params
from chit.cli.reads import RECEIPTS, SHOW, list_receipts, note_unswept, show_receipt


# ``receipts`` and ``show`` run without click too (chit.cli.entry): their parameters and
# their work live in chit.cli.reads, click only wraps them.
@click.command("receipts")
@click_params(RECEIPTS)
@click.pass_context
def receipts(ctx: click.Context, /, **options: Any) -> None:
    """List receipts, most recently observed first."""
    list_receipts(home_option(ctx), **options)


@click.command("show")
@click_params(SHOW)
@click.pass_context
def show(ctx: click.Context, /, **options: Any) -> None:
    """Show one receipt (a unique id prefix is enough) with its timeline."""
    show_receipt(home_option(ctx), **options)


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
    with read_store(home_of(ctx)) as store:
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
            note_unswept()


COMMANDS = [receipts, show, export]
