"""``chit daemon`` (run, status, stop, restart, start) and ``chit follow``.

The daemon owns every server session of a home; commands that need a server start it on
demand, so these commands are for looking at it and for running it in the foreground
(under a service manager, or to watch its log).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from chit.cli.context import home_of
from chit.errors import ExitCode

if TYPE_CHECKING:
    from chit.engine import Engine
    from chit.engine.rpc import DaemonStatus
    from chit.receipts import Receipt

STOP_WAIT_S = 20.0


def detach(receipt_id: str | None, in_daemon: bool) -> None:
    """Ctrl-C while following: say what goes on and how to follow again; exit 130."""
    if receipt_id is None:
        where = "in chit's daemon" if in_daemon else "on the server"
        click.echo(
            f"chit: interrupted before the server answered; the call may still be accepted"
            f" {where}: see `chit receipts` (or `chit intents` if its outcome is unknown)",
            err=True,
        )
    elif in_daemon:
        click.echo(
            f"chit: detached from {receipt_id}; the task keeps running in chit's daemon."
            f" Follow it again with: chit follow {receipt_id}",
            err=True,
        )
    else:
        click.echo(
            f"chit: detached from {receipt_id} (--no-daemon: a stdio server's task stops"
            f" with this command; an HTTP server's goes on). Follow it again with:"
            f" chit follow {receipt_id}",
            err=True,
        )
    sys.exit(int(ExitCode.DETACHED))


@click.command("follow")
@click.argument("receipt")
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")
@click.pass_context
def follow(ctx: click.Context, receipt: str, as_json: bool) -> None:
    """Follow RECEIPT until it ends, is lost or needs a person; exit code as ``call --wait``.

    Input requests are asked on the terminal when there is one. Ctrl-C detaches (exit
    130): the task keeps running.
    """
    from chit.cli.commands_calls import wait_for
    from chit.cli.engine import print_receipt, run_engine, use_daemon, wait_exit_code

    seen: dict[str, str] = {}

    async def work(engine: Engine) -> Receipt:
        current = await engine.receipt(receipt)
        seen["id"] = current.receipt_id
        return await wait_for(engine, current)

    try:
        done = run_engine(ctx, work)
    except KeyboardInterrupt:
        detach(seen.get("id", receipt), use_daemon(ctx))
    print_receipt(done, as_json)
    code = wait_exit_code(done)
    if code is not ExitCode.OK:
        sys.exit(int(code))


@click.group("daemon", invoke_without_command=True)
@click.option("--spawned", is_flag=True, hidden=True, help="Started on demand by a client.")
@click.pass_context
def daemon(ctx: click.Context, spawned: bool) -> None:
    """Run chit's daemon in the foreground (one per home; owns every server session).

    Commands that need a server start it on their own; run it yourself to watch it, or
    under a service manager (``chit daemon install``). SIGINT/SIGTERM stop it.
    """
    if ctx.invoked_subcommand is not None:
        return
    run_foreground(ctx, spawned=spawned)


def run_foreground(ctx: click.Context, *, spawned: bool = False) -> None:
    """Serve the home's daemon in this process until stopped."""
    from chit.cli.engine import options_from_env
    from chit.daemon.service import run

    home = home_of(ctx).ensure()
    if not spawned:
        click.echo(f"chit: daemon for {home.root}; Ctrl-C stops it", err=True)
    code = run(home, options_from_env(), spawned=spawned)
    if code:
        sys.exit(code)


def _status(ctx: click.Context) -> DaemonStatus | None:
    import anyio

    from chit.engine.daemon_control import daemon_status
    from chit.engine.start import DaemonUnavailable

    home = home_of(ctx)
    try:
        return anyio.run(daemon_status, home)
    except DaemonUnavailable:
        return None


@daemon.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Is the daemon running: pid, socket, clients and server sessions (exit 3: not running)."""
    found = _status(ctx)
    if found is None:
        if as_json:
            click.echo(json.dumps({"running": False}))
        else:
            click.echo("chit's daemon is not running for this home", err=True)
        sys.exit(int(ExitCode.NOT_FOUND))
    if as_json:
        click.echo(json.dumps({"running": True, **found.model_dump(mode="json")}, indent=2))
        return
    click.echo(f"running   pid {found.pid} since {found.started_at} (chit {found.chit_version})")
    click.echo(f"socket    {found.socket}")
    click.echo(f"log       {found.log_path}")
    click.echo(f"clients   {found.clients}")
    click.echo(
        f"reconcile {'yes' if found.reconciling else 'no (another process holds the lease)'}"
    )
    for s in found.servers:
        state = "connected" if s.connected else "idle"
        if s.last_error:
            state = f"failing ({s.failures}x): {s.last_error}"
        pid = f" pid {s.pid}" if s.pid else ""
        click.echo(f"server    {s.name} ({s.transport}{pid}): {state}; {s.live_receipts} live")


def _stop(ctx: click.Context) -> bool:
    """Stop the home's daemon (politely, then by signal); True when one was running."""
    import anyio

    from chit.engine.daemon_control import stop_daemon
    from chit.engine.paths import DaemonPaths
    from chit.engine.start import lock_is_held, lock_pid, wait_until_gone

    paths = DaemonPaths(home_of(ctx))
    running = lock_pid(paths.lock) if lock_is_held(paths.lock) else None
    asked = anyio.run(stop_daemon, paths.home)
    if asked is None and running is None:
        return False
    pid = asked or running
    if wait_until_gone(paths, STOP_WAIT_S, pid):
        return True
    if pid is not None:  # it does not answer or does not stop: the signal
        import signal

        os.kill(pid, signal.SIGTERM)
        if wait_until_gone(paths, STOP_WAIT_S, pid):
            return True
    from chit.errors import ChitError

    raise ChitError(f"chit's daemon (pid {pid}) did not stop; see {paths.log}")


@daemon.command("stop")
@click.pass_context
def stop(ctx: click.Context) -> None:
    """Stop the daemon and every server it runs (exit 0 also when none runs)."""
    if _stop(ctx):
        click.echo("chit's daemon stopped", err=True)
    else:
        click.echo("chit's daemon was not running", err=True)


def _start(ctx: click.Context) -> Any:
    import anyio

    from chit.engine.remote import RemoteEngine

    async def hello() -> Any:
        async with RemoteEngine.open(home_of(ctx).ensure()) as engine:
            return engine.hello

    return anyio.run(hello)


@daemon.command("start")
@click.pass_context
def start(ctx: click.Context) -> None:
    """Start the daemon in the background unless it runs (commands do this on their own)."""
    hello = _start(ctx)
    click.echo(f"chit's daemon runs (pid {hello.pid})", err=True)


@daemon.command("restart")
@click.pass_context
def restart(ctx: click.Context) -> None:
    """Stop the daemon (if it runs) and start a new one in the background."""
    _stop(ctx)
    hello = _start(ctx)
    click.echo(f"chit's daemon restarted (pid {hello.pid})", err=True)


@daemon.command("install")
@click.option(
    "--platform",
    "platform_",
    type=click.Choice(["linux", "darwin"]),
    hidden=True,
    help="Write the other platform's file (tests).",
)
@click.pass_context
def install(ctx: click.Context, platform_: str | None) -> None:
    """Write a systemd user unit (Linux) or a launchd agent (macOS) for this home.

    Prints the file it wrote and the command that enables it; never runs that command.
    """
    from chit.daemon.install import install as write_service

    made = write_service(home_of(ctx).ensure(), platform=platform_)
    click.echo(f"chit: wrote {made.kind} {made.path}:", err=True)
    click.echo(made.content, nl=False)
    click.echo(f"chit: enable it with: {made.enable}", err=True)


COMMANDS = [daemon, follow]
