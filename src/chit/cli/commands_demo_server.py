"""``chit demo-server``: the task fixture server (stdio by default, or HTTP)."""

from __future__ import annotations

import click


@click.command("demo-server")
@click.option(
    "--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp."
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="Task store (default: $CHIT_HOME/demo-tasks.db, else a per-user file in the temp dir).",
)
def demo_server(http: str | None, db: str | None) -> None:
    """Run the MCP task fixture server (both task protocol generations)."""
    from chit.demo.server import default_db_path, run_http, run_stdio

    path = db or str(default_db_path())
    if http is None:
        run_stdio(path)
        return
    host, sep, port = http.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter("expected HOST:PORT", param_hint="--http")
    run_http(path, host or "127.0.0.1", int(port))


COMMANDS = [demo_server]
