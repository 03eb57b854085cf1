"""``chit proxy SERVER [--http HOST:PORT]``: the MCP server hosts launch in place of SERVER.

stdout is the MCP channel (stdio mode): nothing else is ever printed there. Errors before
serving (unknown server, unreachable, key store) are one stderr line with the usual exit
code, which the host reports as the server failing to start.

Hosts stop a stdio server by closing its stdin, then SIGTERM (the MCP stdio transport's
shutdown sequence). Both end the proxy the same way — its calls in flight are noted as
given up, the engine (``--no-daemon``) closes its sessions — with exit 0 and nothing on
stderr: hosts keep a server's stderr in their logs, and some show it as an error.
"""

from __future__ import annotations

from typing import Any

import click

from chit.cli.context import home_of
from chit.cli.engine import options_from_env, use_daemon


@click.command("proxy")
@click.argument("server")
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
)
@click.pass_context
def proxy(ctx: click.Context, server: str, http: str | None) -> None:
    """Serve SERVER to an agent host through chit: every task it starts gets a receipt.

    Launch it where the host would launch SERVER (`chit servers wrap CONFIG` rewrites a
    host's config to do so). Everything is forwarded to SERVER through chit's daemon
    (started on demand; `--no-daemon` runs the engine in this process); tool calls that
    become tasks get receipts, the host gets chit's own task ids, and either task
    generation is translated to the other.
    """
    import anyio

    from chit.cli.engine import _first_leaf

    address: tuple[str, int] | None = None
    if http is not None:
        host, sep, port_text = http.rpartition(":")
        if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise click.BadParameter("expected HOST:PORT", param_hint="--http")
        address = (host, int(port_text))
    home = home_of(ctx).ensure()
    settings = options_from_env()
    _log_to_stderr()
    daemon = use_daemon(ctx)

    async def main() -> None:
        # A signal ends only the serving, as EOF does: the backend (the daemon's
        # connection, or the engine) stays open while the host's calls in flight are
        # noted as given up.
        serving = anyio.CancelScope()
        async with anyio.create_task_group() as outer:
            outer.start_soon(_stop_on_signals, serving)
            await run(serving)
            outer.cancel_scope.cancel()

    async def run(serving: anyio.CancelScope) -> None:
        from chit.proxy.server import open_host, serve_http, serve_stdio

        async def serve(backend: object) -> None:
            proxied = await open_host(backend, home, server)  # type: ignore[arg-type]
            with serving:
                if address is None:
                    await serve_stdio(proxied)
                else:
                    await serve_http(proxied, *address)

        if daemon:
            from chit.proxy.remote import RemoteBackend

            # A proxy without its daemon cannot serve: it exits, and the host starts a
            # new one (which starts a new daemon) instead of every request failing.
            async with (
                RemoteBackend.open(home, client="proxy") as remote,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(remote.until_lost)
                await serve(remote)
                tg.cancel_scope.cancel()
            return
        from chit.engine.local import LocalEngine
        from chit.proxy.backend import EngineSide, LocalBackend

        async with LocalEngine.open(home, options=settings, run=True) as engine:
            local = LocalBackend(EngineSide(engine))
            try:
                await serve(local)
            finally:
                local.detach()

    try:
        anyio.run(main)
    except BaseExceptionGroup as group:
        raise _first_leaf(group) from None


async def _stop_on_signals(scope: Any) -> None:
    """SIGTERM or SIGHUP (the host stops us, or its terminal went away): end as on EOF."""
    import signal

    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return


def _log_to_stderr() -> None:
    """Log warnings to stderr (hosts keep a server's stderr in their logs); stdout is MCP's.

    Only warnings and errors by default: a proxy that works says nothing, since some
    hosts show whatever a server writes to stderr as an error.
    ``CHIT_PROXY_LOG_LEVEL=INFO`` (or ``DEBUG``) tells more.
    """
    import logging
    import os
    import sys

    level = os.environ.get("CHIT_PROXY_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        format="chit proxy %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("mcp", "httpx", "uvicorn", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


COMMANDS = [proxy]
