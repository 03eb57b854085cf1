"""``chit sidecar``: the anchor-contract MCP server, its tokens, decisions and stats."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import click

from chit.cli.context import home_of
from chit.errors import UsageError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _store(ctx: click.Context) -> Any:
    from chit.sidecar.anchors import SidecarStore

    home = home_of(ctx).ensure()
    return SidecarStore.open(home.sidecar_db_path)


def _gateway(home: Any) -> Any:
    """The Supervisor's receipt gateway (None when the runtime is not available)."""
    try:
        import chit.runtime  # noqa: F401 - only checks the runtime is installed
    except ImportError:
        return None
    return SupervisorGateway(home)


@click.group("sidecar", invoke_without_command=True)
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP (loopback only).")
@click.option("--no-auth", is_flag=True, help="HTTP without tokens: one local principal (tests).")
@click.option("--stats", "show_stats", is_flag=True, help="Print the counters and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --stats: print JSON.")
@click.option("--no-executor", is_flag=True, help="Do not apply intents in this process.")
@click.pass_context
def sidecar(
    ctx: click.Context,
    http: str | None,
    no_auth: bool,
    show_stats: bool,
    as_json: bool,
    no_executor: bool,
) -> None:
    """Run the sidecar MCP server (stdio by default); agents declare work through it."""
    if ctx.invoked_subcommand is not None:
        return
    if show_stats:
        from chit.sidecar import stats

        with _store(ctx) as store:
            data = stats.collect(store.db)
        click.echo(json.dumps(data, indent=2) if as_json else stats.render(data))
        return
    from chit.sidecar.run import serve

    home = home_of(ctx).ensure()
    host, port = None, None
    if http is not None:
        host, sep, port_text = http.rpartition(":")
        if not sep or not port_text.isdigit():
            raise click.BadParameter("expected HOST:PORT", param_hint="--http")
        host = host.strip("[]") or "127.0.0.1"
        if host not in LOOPBACK:
            raise UsageError("the sidecar listens on loopback only (127.0.0.1, localhost, ::1)")
        port = int(port_text)
    serve(
        home,
        host=host,
        port=port,
        auth=not no_auth,
        executor=not no_executor,
        gateway=_gateway(home),
    )


@sidecar.group("token")
def token() -> None:
    """Bearer tokens of the HTTP sidecar (one principal each)."""


@token.command("add")
@click.argument("name")
@click.option("--replace", is_flag=True, help="Rotate an existing token (records stay).")
@click.pass_context
def token_add(ctx: click.Context, name: str, replace: bool) -> None:
    """Create a token for NAME and print it once (it is stored only as a hash)."""
    from chit.sidecar.principals import add_token

    with _store(ctx) as store:
        click.echo(add_token(store.db, name, replace=replace))


@token.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def token_list(ctx: click.Context, as_json: bool) -> None:
    """List token names (never the tokens)."""
    from chit.sidecar.principals import list_tokens

    with _store(ctx) as store:
        rows = list_tokens(store.db)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=2))
        return
    for r in rows:
        click.echo(f"{r.name}\tcreated {r.created_at}\tlast used {r.last_used_at or '-'}")


@token.command("remove")
@click.argument("name")
@click.pass_context
def token_remove(ctx: click.Context, name: str) -> None:
    """Delete NAME's token (its records stay bound to NAME)."""
    from chit.sidecar.principals import remove_token

    with _store(ctx) as store:
        remove_token(store.db, name)


@sidecar.command("decisions")
@click.option("--all", "include_done", is_flag=True, help="Include answered and cancelled.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def decisions_cmd(ctx: click.Context, include_done: bool, as_json: bool) -> None:
    """Questions agents asked with work_ask, waiting for an answer."""
    from chit.sidecar import decisions

    with _store(ctx) as store:
        rows = decisions.pending(store.db, include_done=include_done)
    if as_json:
        click.echo(json.dumps([d.to_dict() for d in rows], indent=2))
        return
    for d in rows:
        click.echo(f"{d.id}\t{d.state}\t{d.item_id}\t{d.question}")


@sidecar.command("decide")
@click.argument("decision_id")
@click.option("--json", "answer", required=True, help="The answer as JSON.")
@click.pass_context
def decide_cmd(ctx: click.Context, decision_id: str, answer: str) -> None:
    """Answer a pending decision; the asking task completes with the answer."""
    from chit.sidecar import decisions

    try:
        value = json.loads(answer)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--json is not valid JSON: {exc}") from exc
    with _store(ctx) as store:
        done = decisions.decide(store.db, decision_id, value)
    click.echo(json.dumps(done.to_dict()))


@sidecar.command("unblock")
@click.argument("intent_id")
@click.pass_context
def unblock_cmd(ctx: click.Context, intent_id: str) -> None:
    """Re-queue a blocked intent after acting on its reason."""
    from chit.errors import NotFound
    from chit.sidecar.queue import unblock

    with _store(ctx) as store:
        if not unblock(store, None, intent_id):
            raise NotFound(f"no blocked intent {intent_id}")


@sidecar.command("executor")
@click.option("--once", is_flag=True, help="Apply what is due, then exit.")
@click.pass_context
def executor_cmd(ctx: click.Context, once: bool) -> None:
    """Run the executor alone (without serving MCP)."""
    from chit.sidecar.executor import Executor, ExecutorThread
    from chit.sidecar.owner import VaultOwnerResolver

    home = home_of(ctx).ensure()
    executor = Executor(home, VaultOwnerResolver(home))
    if once:
        try:
            click.echo(json.dumps({"applied": executor.run_once()}))
        finally:
            executor.close()
        return
    thread = ExecutorThread(executor).start()
    try:
        sys.stdin.read() if not sys.stdin.isatty() else click.pause("executor running")
    finally:
        thread.stop()


COMMANDS = [sidecar]


class SupervisorGateway:
    """``chit.sidecar.gateway.ReceiptGateway`` over the runtime's Supervisor.

    The Supervisor lives in its own event loop thread (a blocking portal), opened on the
    first receipt tool call, so a sidecar that is never asked for receipts never needs
    the vault for them. Errors become answers in the sidecar's vocabulary.
    """

    def __init__(self, home: Any) -> None:
        self._home = home
        self._lock = threading.Lock()
        self._portal: Any = None
        self._sup: Any = None
        self._exits: list[Any] = []

    def _ensure(self) -> tuple[Any, Any]:
        import anyio.from_thread

        from chit.runtime import Supervisor

        with self._lock:
            if self._sup is None:
                portal_cm = anyio.from_thread.start_blocking_portal()
                portal = portal_cm.__enter__()
                sup_cm = portal.wrap_async_context_manager(Supervisor.open(self._home))
                try:
                    self._sup = sup_cm.__enter__()
                except BaseException:
                    portal_cm.__exit__(None, None, None)
                    raise
                self._portal = portal
                self._exits = [sup_cm, portal_cm]
            return self._portal, self._sup

    def close(self) -> None:
        """Close the Supervisor and its thread."""
        with self._lock:
            for cm in self._exits:
                cm.__exit__(None, None, None)
            self._exits, self._sup, self._portal = [], None, None

    async def _run(self, fn: Any) -> dict[str, Any] | None:
        import anyio

        from chit.errors import ChitError, NotFound

        def go() -> dict[str, Any] | None:
            portal, sup = self._ensure()
            result: dict[str, Any] | None = portal.call(fn, sup)
            return result

        try:
            return await anyio.to_thread.run_sync(go)
        except NotFound:
            return None
        except ChitError as exc:
            transient = int(exc.exit_code) in (4, 5, 6)  # key store, store, unreachable
            return {
                "receipt_id": None,
                "state": "failed",
                "failure_class": "transient" if transient else "permanent",
                "reason": exc.message,
            }

    async def start_call(
        self,
        *,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        purpose: str,
        work_ref: str | None,
        principal: str,
    ) -> dict[str, Any]:
        """Start the call through the Supervisor (intent first, receipt on acceptance)."""
        del principal  # bound by the sidecar's receipt_links, not by the library

        async def run(sup: Any) -> dict[str, Any]:
            receipt = await sup.call(server, tool, arguments, purpose=purpose, work_ref=work_ref)
            return _receipt_view(receipt)

        answer = await self._run(run)
        return answer if answer is not None else {"receipt_id": None, "state": "failed"}

    async def status(self, receipt_id: str) -> dict[str, Any] | None:
        """Check the task once when due (if this process may reconcile), then describe it."""

        async def run(sup: Any) -> dict[str, Any] | None:
            from chit import clock
            from chit.receipts import ObservationSource

            receipt = sup.store.receipts.get(receipt_id)
            if receipt is None:
                return None
            due = receipt.next_check_at is None or receipt.next_check_at <= clock.now()
            if not receipt.is_terminal and due and sup.lease.try_acquire():
                try:
                    await sup.reconciler.check(receipt_id, ObservationSource.POLL)
                finally:
                    sup.lease.release()
                receipt = sup.store.receipts.require(receipt_id)
            return _receipt_view(receipt)

        return await self._run(run)

    async def result(self, receipt_id: str) -> dict[str, Any] | None:
        """The outcome when terminal (digest, bounded summary, error), else the state."""

        async def run(sup: Any) -> dict[str, Any] | None:
            receipt = sup.store.receipts.get(receipt_id)
            if receipt is None:
                return None
            view = _receipt_view(receipt)
            out = receipt.outcome
            view["outcome"] = None if out is None else out.model_dump(mode="json")
            return view

        return await self._run(run)

    async def cancel(self, receipt_id: str) -> dict[str, Any] | None:
        """Request cancellation; the view carries the cancellation posture."""

        async def run(sup: Any) -> dict[str, Any] | None:
            if sup.store.receipts.get(receipt_id) is None:
                return None
            return _receipt_view(await sup.cancel(receipt_id))

        return await self._run(run)


def _receipt_view(receipt: Any) -> dict[str, Any]:
    """A receipt in the sidecar's answer shape: state, freshness and the next decision."""
    from chit import clock
    from chit.receipts import freshness, next_safe_decision

    now = clock.now()
    decision = next_safe_decision(receipt, now)
    return {
        "receipt_id": receipt.receipt_id,
        "state": str(receipt.state),
        "freshness": str(freshness(receipt, now)),
        "status_at": clock.iso(receipt.status_at),
        "cancellation": str(receipt.cancel.posture),
        "next": {
            "action": str(decision.action),
            "actor": str(decision.actor),
            "reason": decision.reason,
            "check_at": clock.iso(decision.check_at) if decision.check_at else None,
        },
    }
