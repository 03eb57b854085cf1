"""``chit prune``: trim the timelines of settled receipts and give the space back."""

from __future__ import annotations

import re
from datetime import timedelta

import click

from chit import clock
from chit.cli.context import home_of, open_store
from chit.errors import UsageError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "": 86400}


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (a bare number is days).

    Raises:
        UsageError: anything else (exit 2).
    """
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise UsageError(f"--older-than expects a duration like 30d, 12h or 90m, not {text!r}")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise UsageError(f"--older-than {text!r} is too long") from None


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


@click.command("prune")
@click.option(
    "--older-than",
    "older_than",
    metavar="AGE",
    help="Trim receipts settled longer ago than AGE (30d, 12h, …; default: [retention] "
    "timeline_days in config.toml, else 30d).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be pruned; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="The result as JSON.")
@click.pass_context
def prune(ctx: click.Context, older_than: str | None, dry_run: bool, as_json: bool) -> None:
    """Keep only the first and last observation of long-settled receipts; reclaim space.

    A receipt is settled when its task ended and its outcome was judged (accepted,
    rejected, or no acceptance needed). Receipts themselves are never deleted.
    """
    from chit.cli.output import emit_json
    from chit.runtime.retention import DEFAULT_DAYS, timeline_days
    from chit.store.retention import file_bytes

    if older_than is not None:
        age = parse_age(older_than)
    else:
        days = timeline_days(home_of(ctx))
        age = timedelta(days=days if days is not None else DEFAULT_DAYS)
    try:
        cutoff = clock.now() - age
    except OverflowError:
        raise UsageError(f"--older-than {older_than!r} reaches before year 1") from None
    with open_store(ctx) as store:
        before = file_bytes(store.path)
        result = store.retention.prune(cutoff, dry_run=dry_run)
        reclaimed = None if dry_run else store.retention.reclaim()
    after = reclaimed.bytes_after if reclaimed is not None else before
    if as_json:
        emit_json(
            {
                "cutoff": clock.iso(cutoff),
                "receipts": result.receipts,
                "rows": result.rows,
                "dry_run": dry_run,
                "bytes_before": before,
                "bytes_after": after,
                "converted": bool(reclaimed and reclaimed.converted),
            }
        )
        return
    verb = "would prune" if dry_run else "pruned"
    click.echo(
        f"{verb} {result.rows:,} timeline rows of {result.receipts:,} receipts settled before "
        f"{clock.iso(cutoff)}"
    )
    if reclaimed is None:
        click.echo(f"database {_size(before)} (nothing changed)")
    else:
        note = " (converted to incremental auto-vacuum)" if reclaimed.converted else ""
        click.echo(f"database {_size(before)} -> {_size(after)}{note}")


COMMANDS = [prune]
