"""``chit reconcile`` and ``chit intents``: keeping receipts true."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from chit.cli.context import open_store
from chit.cli.engine import parse_arguments, print_receipt, run_engine

if TYPE_CHECKING:
    from chit.engine import Engine
    from chit.engine.models import ReconcileSummary
    from chit.receipts import Receipt


@click.command("reconcile")
@click.option("--once", is_flag=True, help="One pass over every live receipt, then exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def reconcile(ctx: click.Context, once: bool, as_json: bool) -> None:
    """Check live receipts against their servers (without --once: until interrupted)."""
    if not once:
        from chit.cli.commands_daemon import run_foreground

        run_foreground(ctx)
        return

    async def work(engine: Engine) -> ReconcileSummary:
        return await engine.reconcile_now()

    report = run_engine(ctx, work)
    doc: dict[str, Any] = report.model_dump(mode="json")
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    elif report.viewer:
        click.echo(f"another reconciler is active ({report.holder}); nothing done")
    else:
        states = ", ".join(f"{k} {v}" for k, v in report.by_state.items() if v)
        click.echo(f"checked {report.checked}; {states or 'no receipts'}")
        if report.intents_unknown:
            click.echo(f"{report.intents_unknown} call(s) with unknown outcome: see 'chit intents'")
        if report.problems:
            click.echo(f"{report.problems} receipt(s) cannot be retrieved: see 'chit receipts'")


@click.group("intents", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the intents as JSON.")
@click.option("--all", "show_all", is_flag=True, help="Also list settled intents.")
@click.pass_context
def intents(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """Calls whose outcome is unknown (or all intents with --all)."""
    if ctx.invoked_subcommand is not None:
        return
    from chit.cli.output import printable
    from chit.receipts import IntentState

    with open_store(ctx, readonly=True) as store:
        rows = store.intents.list() if show_all else store.intents.list(IntentState.UNKNOWN)
        rows += [] if show_all else store.intents.list(IntentState.SENDING)
    if as_json:
        click.echo(json.dumps([i.model_dump(mode="json") for i in rows], indent=2))
        return
    for i in rows:
        where = printable(f"{i.server}/{i.tool}")
        click.echo(f"{i.request_key}  {i.state.value:<9}  {where}  {printable(i.error or '')}")
    if not rows:
        click.echo("no calls with an unknown outcome", err=True)


@intents.command("retry")
@click.argument("key")
@click.option("--args", "args_json", metavar="JSON", help="The original arguments (verified).")
@click.option("--arg", "pairs", multiple=True, metavar="K=V", help="One argument (repeat).")
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")
@click.pass_context
def retry(
    ctx: click.Context, key: str, args_json: str | None, pairs: tuple[str, ...], as_json: bool
) -> None:
    """Re-send an unknown call under the same request key."""
    arguments = parse_arguments(args_json, pairs)

    async def work(engine: Engine) -> Receipt:
        return await engine.retry_intent(key, arguments)

    print_receipt(run_engine(ctx, work), as_json)


@intents.command("abandon")
@click.argument("key")
@click.pass_context
def abandon(ctx: click.Context, key: str) -> None:
    """Give up on an unknown call (its effect, if any, stays unknown)."""
    from chit.errors import Conflict, NotFound
    from chit.receipts import IntentState

    with open_store(ctx) as store:
        intent = store.intents.get(key)
        if intent is None:
            raise NotFound(f"no intent {key}")
        if intent.state is not IntentState.UNKNOWN:
            raise Conflict(f"intent {key} is {intent.state}; only unknown intents abandon")
        # expected=: a concurrent retry or acceptance between the read and this write
        # loses the race cleanly (Conflict, exit 8) instead of being overwritten.
        store.intents.mark(
            key,
            IntentState.ABANDONED,
            error="abandoned by the user",
            expected=IntentState.UNKNOWN,
        )
    click.echo(f"abandoned {key}")


COMMANDS = [reconcile, intents]
