"""``chit demo-server``: the task fixture server (stdio by default, or HTTP)."""

from __future__ import annotations

import click

from chit.cli.context import home_of


@click.command("demo-server")
@click.option(
    "--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp."
)
@click.option(
    "--store",
    metavar="URL|PATH",
    help="Task store: postgresql://… (replicas share it) or a SQLite file"
    " (default: [store] tasks in config.toml, else the --db default).",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="SQLite task store (default: demo-tasks.db in the chit home).",
)
@click.pass_context
def demo_server(ctx: click.Context, http: str | None, store: str | None, db: str | None) -> None:
    """Run the MCP task fixture server (both task protocol generations)."""
    from chit.cli.stores import configured_store, store_failure
    from chit.demo.server import build_demo_server, default_db_path, run_http, run_stdio
    from chit.tasks.server.backend import StoreUnavailable

    if store is not None and db is not None:
        raise click.UsageError("give --store or --db, not both")
    home = home_of(ctx)
    target = store or db or configured_store(home, "tasks")
    if target is None:
        target = str(default_db_path(home.ensure()))
    host, port = "", 0
    if http is not None:
        host, sep, port_text = http.rpartition(":")
        if not sep or not port_text.isdigit():
            raise click.BadParameter("expected HOST:PORT", param_hint="--http")
        host, port = host or "127.0.0.1", int(port_text)
    try:
        server = build_demo_server(target)
    except (StoreUnavailable, RuntimeError) as exc:
        raise store_failure("task store", exc) from exc
    if http is None:
        run_stdio(server)
    else:
        run_http(server, host, port)


COMMANDS = [demo_server]
