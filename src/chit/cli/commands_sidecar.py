"""``chit sidecar``: the anchor-contract MCP server, its tokens, decisions and stats."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from chit.cli.context import home_of
from chit.errors import UsageError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _target(ctx: click.Context) -> Any:
    """The sidecar store: ``--store``, else ``[store] sidecar`` in config, else the file."""
    from chit.sidecar.sql import sidecar_target

    home = home_of(ctx).ensure()
    chosen = (ctx.find_object(dict) or {}).get("sidecar_store")
    return chosen or sidecar_target(home)


def _store(ctx: click.Context) -> Any:
    from chit.cli.stores import store_failure
    from chit.sidecar.anchors import SidecarStore
    from chit.sidecar.pgdb import StoreUnreachable
    from chit.store import StoreTooNew

    try:
        return SidecarStore.open(_target(ctx))
    except (StoreUnreachable, StoreTooNew) as exc:
        raise store_failure("sidecar store", exc) from exc


def _gateway(ctx: click.Context, home: Any, executor_in_process: bool) -> Any:
    """The receipt gateway: the home's daemon, or (``--no-daemon``) a Supervisor here.

    Through the daemon, tasks agents start share its server sessions (and outlive this
    process); the daemon hosts the sidecar executor. In process, the Supervisor
    reconciles (or watches, when a daemon holds the lease) and, if this process runs no
    standalone executor, hosts the sidecar executor as well.
    """
    from chit.cli.engine import use_daemon

    if use_daemon(ctx):
        from chit.engine.gateway import EngineGateway

        return EngineGateway(home)
    try:
        from chit.runtime.sidecar_host import SupervisorGateway
    except ImportError:
        return None
    return SupervisorGateway(home, host_executor=not executor_in_process)


@click.group("sidecar", invoke_without_command=True)
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP (loopback only).")
@click.option("--no-auth", is_flag=True, help="HTTP without tokens: one local principal (tests).")
@click.option("--stats", "show_stats", is_flag=True, help="Print the counters and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --stats: print JSON.")
@click.option("--no-executor", is_flag=True, help="Do not apply intents in this process.")
@click.option(
    "--store",
    "store_url",
    metavar="URL|PATH",
    help="Sidecar store: postgresql://… (replicas share it) or a SQLite file"
    " (default: [store] sidecar in config.toml, else the home's sidecar.db).",
)
@click.pass_context
def sidecar(
    ctx: click.Context,
    http: str | None,
    no_auth: bool,
    show_stats: bool,
    as_json: bool,
    no_executor: bool,
    store_url: str | None,
) -> None:
    """Run the sidecar MCP server (stdio by default); agents declare work through it."""
    ctx.ensure_object(dict)["sidecar_store"] = store_url
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
    target = _target(ctx)
    _store(ctx).close()  # opened (and migrated) once here: a bad store is one line, exit 5
    serve(
        home,
        host=host,
        port=port,
        auth=not no_auth,
        executor=not no_executor,
        gateway=_gateway(ctx, home, not no_executor),
        store=target,
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
    from chit.inputs import valid_name

    for r in rows:
        name = r.name if valid_name(r.name) else repr(r.name)  # a legacy name with a "\n"
        click.echo(f"{name}\tcreated {r.created_at}\tlast used {r.last_used_at or '-'}")


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
    from chit.cli.output import printable

    for d in rows:  # the question is an agent's text
        click.echo("\t".join(printable(str(v)) for v in (d.id, d.state, d.item_id, d.question)))


@sidecar.command("decide")
@click.argument("decision_id")
@click.option("--json", "answer", required=True, help="The answer as JSON.")
@click.pass_context
def decide_cmd(ctx: click.Context, decision_id: str, answer: str) -> None:
    """Answer a pending decision; the asking task completes with the answer."""
    from chit.inputs import parse_json
    from chit.sidecar import decisions

    value = parse_json(answer, "--json")
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
    executor = Executor(home, VaultOwnerResolver(home), sidecar_path=_target(ctx))
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
