"""``chit call``, ``answer``, ``cancel``, ``accept``, ``reject``: acting on tasks."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from chit.cli.context import home_of
from chit.cli.engine import (
    json_object,
    parse_arguments,
    print_receipt,
    run_engine,
    wait_exit_code,
)
from chit.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from chit.engine import Engine
    from chit.receipts import InputRequest, Receipt


async def wait_for(engine: Engine, receipt: Receipt) -> Receipt:
    """Follow ``receipt`` to its end, asking for input on a terminal (``--wait``).

    A value that does not fit is asked again (the prompt), and so is an answer the
    engine refuses; a request answered elsewhere meanwhile is simply followed on.
    """
    from chit.cli.forms import Abandoned, terminal_say
    from chit.errors import Conflict

    interactive = sys.stdin.isatty()
    while True:
        receipt = await engine.follow(receipt.receipt_id)
        if not receipt.pending_inputs or receipt.is_terminal or not interactive:
            return receipt
        request = receipt.pending_inputs[0]
        try:
            content = await _ask_unless_answered(engine, receipt, request)
        except Abandoned:
            terminal_say("chit: the request was answered elsewhere; following on")
            continue
        except UsageError as exc:  # not a form chit can ask: the person answers otherwise
            terminal_say(f"chit: {exc.message}")
            return receipt
        try:
            receipt = await engine.answer(receipt.receipt_id, request.key, content)
        except UsageError as exc:
            terminal_say(f"chit: {exc.message} — asking again")
            for detail in exc.details:
                terminal_say(f"chit:   {detail}")
        except Conflict as exc:
            terminal_say(f"chit: {exc.message}")


async def _ask_unless_answered(
    engine: Engine, receipt: Receipt, request: InputRequest
) -> dict[str, Any]:
    """Ask ``request`` on the terminal until answered here — or elsewhere.

    The receipt's events are watched meanwhile: once the request is no longer pending
    (``chit answer`` from another terminal, the TUI, or the task ended) the prompt gives
    up with :class:`~chit.cli.forms.Abandoned`.
    """
    import threading

    import anyio
    from anyio.abc import ObjectReceiveStream

    from chit.cli.forms import ask_on_terminal
    from chit.engine.models import EngineEvent, ReceiptUpdate

    abandoned = threading.Event()

    def settled(current: Receipt) -> bool:
        pending = {q.key for q in current.pending_inputs}
        return current.is_terminal or request.key not in pending

    async def watch(stream: ObjectReceiveStream[EngineEvent]) -> None:
        async for event in stream:
            if isinstance(event, ReceiptUpdate) and settled(event.receipt):
                abandoned.set()
                return

    async with (
        engine.events(receipt_id=receipt.receipt_id) as stream,
        anyio.create_task_group() as tg,
    ):
        # Subscribed first, then looked at: an answer in between is not missed.
        if settled(await engine.receipt(receipt.receipt_id)):
            abandoned.set()
        tg.start_soon(watch, stream)
        try:
            content = await ask_on_terminal(request, abandoned)
        except (Exception, KeyboardInterrupt) as exc:
            # Raised after the task group, which would wrap it in an exception group.
            failed: BaseException | None = exc
        else:
            failed = None
        finally:
            tg.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return content


@click.command("call")
@click.argument("server")
@click.argument("tool")
@click.option("--args", "args_json", metavar="JSON", help="Tool arguments as a JSON object.")
@click.option("--arg", "pairs", multiple=True, metavar="K=V", help="One argument (repeat).")
@click.option("--purpose", help="One line: what this call is for.")
@click.option("--work", "work_ref", metavar="ITEM", help="The work item this call belongs to.")
@click.option("--ttl", "ttl_ms", type=click.IntRange(min=1), metavar="MS", help="Requested TTL.")
@click.option("--accept-if", "accept_if", metavar="EXPR", help="Acceptance check of the result.")
@click.option("--wait", is_flag=True, help="Follow the task to its end; exit code per outcome.")
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")
@click.pass_context
def call(
    ctx: click.Context,
    server: str,
    tool: str,
    args_json: str | None,
    pairs: tuple[str, ...],
    purpose: str | None,
    work_ref: str | None,
    ttl_ms: int | None,
    accept_if: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Call TOOL on SERVER as a task and print its receipt."""
    from chit.cli.commands_daemon import detach
    from chit.cli.engine import use_daemon

    arguments = parse_arguments(args_json, pairs)
    started: dict[str, str] = {}

    async def work(engine: Engine) -> Receipt:
        receipt = await engine.call(
            server,
            tool,
            arguments,
            purpose=purpose,
            work_ref=work_ref,
            ttl_ms=ttl_ms,
            accept_if=accept_if,
        )
        started["id"] = receipt.receipt_id
        return await wait_for(engine, receipt) if wait else receipt

    try:
        receipt = run_engine(ctx, work)
    except KeyboardInterrupt:
        detach(started.get("id"), use_daemon(ctx))
    print_receipt(receipt, as_json)
    if not wait and not receipt.is_terminal and not use_daemon(ctx):
        _warn_if_stdio(ctx, server)
    if wait:
        code = wait_exit_code(receipt)
        if code is not ExitCode.OK:
            sys.exit(int(code))


def _warn_if_stdio(ctx: click.Context, server: str) -> None:
    """Say plainly that, without the daemon, a stdio server's task stops with this command.

    A stdio server is a child of the process that spawned it: with ``--no-daemon`` that
    is ``chit call`` itself, so when it exits the server (and the task it runs) goes
    with it. The user should know that *before* walking away.
    """
    from chit.servers import Registry

    try:
        spec = Registry.for_home(home_of(ctx)).get(server)
    except Exception:  # a warning must never turn a successful call into an error
        return
    if spec.transport == "stdio":
        click.echo(
            f"chit: note: {server} is a stdio server and --no-daemon runs it inside this"
            " command: its task stops when chit exits. Use --wait to follow it here, or"
            " leave out --no-daemon so chit's daemon runs the server.",
            err=True,
        )


@click.command("answer")
@click.argument("receipt")
@click.option("--key", help="Which input request (needed when several are pending).")
@click.option("--json", "answer_json", metavar="JSON", help="The answer, a JSON object.")
@click.option("--decline", is_flag=True, help="Decline the request.")
@click.option("--cancel", "cancel_", is_flag=True, help="Dismiss the request.")
@click.option("--output-json", "as_json", is_flag=True, help="Print the receipt as JSON.")
@click.pass_context
def answer(
    ctx: click.Context,
    receipt: str,
    key: str | None,
    answer_json: str | None,
    decline: bool,
    cancel_: bool,
    as_json: bool,
) -> None:
    """Answer a pending input request of RECEIPT (validated against its schema).

    On a terminal, without --json, --decline or --cancel, the request's fields are asked
    one by one (a value that does not fit is asked again).
    """
    given = sum([answer_json is not None, decline, cancel_])
    if given > 1 or (given == 0 and not sys.stdin.isatty()):
        raise UsageError("give exactly one of --json '{…}', --decline or --cancel")
    content = json_object(answer_json, "--json") if answer_json is not None else None

    async def work(engine: Engine) -> Receipt:
        if given == 0:
            return await _answer_on_terminal(engine, receipt, key)
        return await engine.answer(receipt, key, content, decline=decline, cancel=cancel_)

    print_receipt(run_engine(ctx, work), as_json)


async def _answer_on_terminal(engine: Engine, receipt_id: str, key: str | None) -> Receipt:
    """Ask the pending request's fields on the terminal until the engine takes the answer."""
    from chit.cli.forms import ask_on_terminal, terminal_say
    from chit.runtime.answers import pending_request

    while True:
        receipt = await engine.receipt(receipt_id)
        request = pending_request(receipt, key)
        content = await ask_on_terminal(request)
        try:
            return await engine.answer(receipt.receipt_id, request.key, content)
        except UsageError as exc:
            terminal_say(f"chit: {exc.message} — asking again")
            for detail in exc.details:
                terminal_say(f"chit:   {detail}")


@click.command("cancel")
@click.argument("receipt")
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")
@click.pass_context
def cancel(ctx: click.Context, receipt: str, as_json: bool) -> None:
    """Ask the server to cancel RECEIPT's task; print the cancellation posture."""

    async def work(engine: Engine) -> Receipt:
        return await engine.cancel(receipt)

    print_receipt(run_engine(ctx, work), as_json)


def _decide(ctx: click.Context, receipt: str, accept: bool, why: str | None, as_json: bool) -> None:
    # A verdict needs neither the server nor the data key: store only.
    from chit.cli.context import open_store
    from chit.receipts import AcceptanceState
    from chit.reconcile import ReceiptWriter
    from chit.runtime.acceptance import decide_acceptance

    state = AcceptanceState.ACCEPTED if accept else AcceptanceState.REJECTED
    with open_store(ctx) as store:
        decided = decide_acceptance(ReceiptWriter(store), receipt, state, why)
    print_receipt(decided, as_json)


@click.command("accept")
@click.argument("receipt")
@click.option("--why", help="Why the outcome is acceptable.")
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")
@click.pass_context
def accept(ctx: click.Context, receipt: str, why: str | None, as_json: bool) -> None:
    """Accept the outcome of a finished task."""
    _decide(ctx, receipt, True, why, as_json)


@click.command("reject")
@click.argument("receipt")
@click.option("--why", required=True, help="Why the outcome is not acceptable.")
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")
@click.pass_context
def reject(ctx: click.Context, receipt: str, why: str, as_json: bool) -> None:
    """Reject the outcome of a finished task."""
    _decide(ctx, receipt, False, why, as_json)


COMMANDS = [call, answer, cancel, accept, reject]
