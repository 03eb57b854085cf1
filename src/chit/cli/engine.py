"""What the engine commands share: running a Supervisor for one command, outcomes.

Heavy imports (mcp, the runtime) happen inside functions, so ``chit --version`` stays
fast. Settings from the environment: ``CHIT_TASK_MODE`` (auto | legacy | 2026),
``CHIT_NOTIFICATIONS`` (0 ignores server push), ``CHIT_READ_TIMEOUT`` (seconds).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from chit.cli.context import home_of
from chit.errors import ExitCode, UsageError
from chit.inputs import parse_json

if TYPE_CHECKING:
    from chit.engine import Engine
    from chit.receipts import Receipt
    from chit.runtime import SupervisorOptions

T = TypeVar("T")


def options_from_env(**extra: Any) -> SupervisorOptions:
    """Supervisor options, with the client settings the environment asks for."""
    from chit.reconcile import ClientOptions
    from chit.runtime import SupervisorOptions

    mode, read_timeout, notifications = client_settings()
    client = ClientOptions(mode=mode, read_timeout=read_timeout, notifications=notifications)  # type: ignore[arg-type]
    return SupervisorOptions(client=client, **extra)


def client_settings() -> tuple[str, float, bool]:
    """The environment's client settings (task mode, read timeout, notifications), checked.

    Apart from :func:`options_from_env` so that a command sent to the daemon checks them
    (a bad value exits 2 in both modes) without importing the engine it does not run.

    Raises:
        UsageError: a setting that is not one of its values.
    """
    mode = os.environ.get("CHIT_TASK_MODE", "auto").strip() or "auto"
    if mode not in ("auto", "legacy", "2026"):
        raise UsageError(f"CHIT_TASK_MODE must be auto, legacy or 2026, not {mode!r}")
    notifications = os.environ.get("CHIT_NOTIFICATIONS", "1").strip() not in ("0", "false", "no")
    return mode, _seconds("CHIT_READ_TIMEOUT", "30"), notifications


def _seconds(name: str, default: str) -> float:
    raw = os.environ.get(name, default).strip() or default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{name} must be a positive number of seconds, not {raw!r}")
    return value


def use_daemon(ctx: click.Context) -> bool:
    """False with ``--no-daemon`` / ``CHIT_NO_DAEMON=1``: the engine runs in this process."""
    return not (ctx.find_root().obj or {}).get("no_daemon", False)


def run_engine(ctx: click.Context, work: Callable[[Engine], Awaitable[T]], **options: Any) -> T:
    """Run ``work`` with the home's engine: the daemon's (started on demand), or in process.

    Through the daemon every server session is shared with every other chit process of
    the home; ``--no-daemon`` opens a Supervisor here for this one command.
    """
    import anyio

    home = home_of(ctx).ensure()
    daemon = use_daemon(ctx)
    # Checked in both modes (bad settings exit 2); the options, and the engine they
    # import, only in process: a daemon's client stays thin (tests/test_cold_start.py).
    settings = None if daemon else options_from_env(**options)
    if daemon:
        client_settings()

    async def main() -> T:
        if settings is None:
            from chit.engine.remote import RemoteEngine

            async with RemoteEngine.open(home) as remote:
                return await work(remote)
        from chit.engine.local import LocalEngine

        async with LocalEngine.open(home, options=settings) as local:
            return await work(local)

    try:
        return anyio.run(main)
    except BaseExceptionGroup as group:
        # Task groups wrap what a command raised; the user needs the one real error.
        raise _first_leaf(group) from None


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_leaf(exc)
        return exc
    return group


def json_object(text: str, option: str) -> dict[str, Any]:
    """Parse an option's JSON object, or say which option is wrong and why (exit 2).

    Standard JSON only (``chit.inputs.parse_json``): no NaN/Infinity, bounded nesting,
    no lone surrogates — what a server could not be sent is refused here, not later.
    """
    loaded = parse_json(text, option)
    if not isinstance(loaded, dict):
        raise UsageError(f"{option} must be a JSON object")
    return loaded


def parse_arguments(args_json: str | None, pairs: tuple[str, ...]) -> dict[str, Any]:
    """``--args JSON`` merged with ``--arg k=v`` (v parsed as JSON when it parses)."""
    arguments: dict[str, Any] = json_object(args_json, "--args") if args_json else {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--arg expects NAME=VALUE, got {pair!r}")
        try:
            arguments[name] = parse_json(raw, f"--arg {name}")
        except UsageError:
            arguments[name] = raw  # not (acceptable) JSON: the text itself
    return arguments


def wait_exit_code(receipt: Receipt) -> ExitCode:
    """The documented ``--wait`` exit code for where a receipt ended up."""
    from chit.receipts import AcceptanceState, LifecycleState, RetrievalCondition

    lost = (
        RetrievalCondition.VANISHED,
        RetrievalCondition.EXPIRED,
        RetrievalCondition.INCOMPATIBLE,
    )
    if receipt.acceptance.state is AcceptanceState.REJECTED:
        return ExitCode.REJECTED
    if (
        receipt.retrieval is RetrievalCondition.UNREACHABLE
        and receipt.outcome is None
        and receipt.state is not LifecycleState.CANCELLED
    ):
        # Followed until a person must decide, and the server is still not answering.
        return ExitCode.UNREACHABLE
    if receipt.state is LifecycleState.COMPLETED:
        if receipt.outcome is not None and receipt.outcome.is_error:
            return ExitCode.COMPLETED_WITH_ERROR
        return ExitCode.OK
    if receipt.state is LifecycleState.FAILED:
        return ExitCode.FAILED
    if receipt.state is LifecycleState.CANCELLED:
        return ExitCode.CANCELLED
    if receipt.retrieval in lost:
        return ExitCode.EXPIRED_OR_LOST
    if receipt.pending_inputs or receipt.state is LifecycleState.INPUT_REQUIRED:
        return ExitCode.INPUT_REQUIRED
    return ExitCode.OK


def print_receipt(receipt: Receipt, as_json: bool) -> None:
    """The receipt for ``call``/``answer``/``cancel``: JSON, or id, state and what next."""
    from chit import clock
    from chit.cli.output import emit_json, printable, receipt_json
    from chit.receipts import next_safe_decision

    if as_json:
        emit_json(receipt_json(receipt))
        return
    decision = next_safe_decision(receipt, clock.now())
    state = receipt.state.value
    if receipt.synchronous:
        state += f" (synchronous: {receipt.not_task_reason})"
    click.echo(f"receipt  {receipt.receipt_id}")
    click.echo(
        f"state    {state}"
        + (f" — {printable(receipt.status_message)}" if receipt.status_message else "")
    )
    if receipt.outcome is not None:
        o = receipt.outcome
        text = printable(
            f"error {o.error_code}: {o.error_message}" if o.is_rpc_error else (o.summary or "")
        )
        click.echo(f"outcome  {'isError — ' if o.is_error and not o.is_rpc_error else ''}{text}")
    if receipt.acceptance.check or receipt.acceptance.state.value in ("accepted", "rejected"):
        why = f": {printable(receipt.acceptance.why)}" if receipt.acceptance.why else ""
        click.echo(f"accept   {receipt.acceptance.state.value}{why}")
    for q in receipt.pending_inputs:
        click.echo(f"input    {printable(q.key)}: {printable(q.message or '')}")
    if receipt.cancel.posture.value != "not_requested":
        click.echo(f"cancel   {receipt.cancel.posture.value}")
    click.echo(f"next     {decision.actor}: {printable(decision.reason)}")
