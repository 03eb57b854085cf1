"""``chit servers list|add|remove|import`` and ``chit tools SERVER``.

stdout carries data (listings, import reports, tools); confirmations go to stderr.
Every failure is a ``ChitError`` (one stderr line, documented exit code) raised before
``config.toml`` is replaced, so bad input never changes the registry.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from chit.errors import UsageError

if TYPE_CHECKING:
    from chit.engine import Engine
    from chit.engine.models import ToolsInfo
    from chit.servers import Registry


def _registry(ctx: click.Context) -> Registry:
    from chit.home import resolve_home
    from chit.servers import Registry

    return Registry.for_home(resolve_home(ctx.find_root().obj.get("home")))


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            # Never echo the item: it may be a secret typed without its key.
            raise UsageError(f"{option} expects KEY=VALUE (one value has no key or no '=')")
        out[key.strip()] = value
    return out


def _table(rows: list[list[str]]) -> None:
    from chit.cli.output import printable

    if not rows:
        return
    # Cells may come from a config file, an imported .mcp.json or a server's tool list.
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        click.echo("  ".join([*cells, row[-1]]).rstrip())


@click.group("servers")
def servers() -> None:
    """List, add, remove and import the MCP servers chit connects to."""


@servers.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (secrets as fingerprints).")
@click.pass_context
def list_servers(ctx: click.Context, as_json: bool) -> None:
    """List registered servers; sealed secrets show as fingerprints."""
    specs = _registry(ctx).servers()
    if as_json:
        click.echo(json.dumps([s.public_view() for s in specs.values()], indent=2))
        return
    if not specs:
        click.echo("no servers registered (chit servers add, chit servers import)", err=True)
        return
    rows = [["NAME", "TRANSPORT", "TARGET", "SECRETS"]]
    for spec in specs.values():
        secrets = ", ".join(
            f"{field}.{key}={spec.fingerprints.get(f'{field}.{key}', 'sealed')}"
            for field, key, _ in spec.secret_fields()
        )
        rows.append([spec.name, spec.transport, spec.target, secrets or "-"])
    _table(rows)


@servers.command("add", context_settings={"ignore_unknown_options": False})
@click.argument("name")
@click.argument("extra_args", nargs=-1, metavar="[-- ARG...]")
@click.option("--command", "command", help="stdio: the program to run.")
@click.option("--arg", "args", multiple=True, help="stdio: one argument (repeatable).")
@click.option("--env", "env", multiple=True, metavar="K=V", help="stdio: environment (repeatable).")
@click.option(
    "--secret-env",
    "secret_env",
    multiple=True,
    metavar="K=V",
    help="stdio: environment value that is always sealed, whatever its name.",
)
@click.option("--cwd", help="stdio: working directory.")
@click.option("--url", help="http: the streamable HTTP endpoint.")
@click.option("--header", "headers", multiple=True, metavar="K=V", help="http: header (sealed).")
@click.option("--replace", is_flag=True, help="Overwrite a server with the same name.")
@click.pass_context
def add_server(
    ctx: click.Context,
    name: str,
    extra_args: tuple[str, ...],
    command: str | None,
    args: tuple[str, ...],
    env: tuple[str, ...],
    secret_env: tuple[str, ...],
    cwd: str | None,
    url: str | None,
    headers: tuple[str, ...],
    replace: bool,
) -> None:
    """Register server NAME: either --command (stdio) or --url (http).

    Arguments after -- are appended to the command's arguments. Header values and
    secret-looking environment values (…TOKEN, …KEY, …SECRET, …PASSWORD, …AUTH) are
    sealed with the vault; they never reach config.toml in plaintext.
    """
    from pydantic import ValidationError

    from chit.servers import ServerSpec

    if (command is None) == (url is None):
        raise UsageError("give exactly one of --command (stdio) or --url (http)")
    forced = _pairs(secret_env, "--secret-env")
    data: dict[str, Any] = {"name": name}
    if command is not None:
        if headers:
            raise UsageError("--header applies to --url servers only")
        data |= {
            "transport": "stdio",
            "command": command,
            "args": (*args, *extra_args),
            "env": _pairs(env, "--env") | forced,
            "cwd": cwd,
        }
    else:
        if args or extra_args or env or secret_env or cwd:
            raise UsageError("--arg/--env/--secret-env/--cwd apply to --command servers only")
        data |= {"transport": "http", "url": url, "headers": _pairs(headers, "--header")}
    try:
        spec = ServerSpec.model_validate(data)
    except ValidationError as exc:
        msg = str(exc.errors()[0].get("msg", "invalid")).removeprefix("Value error, ")
        raise UsageError(msg) from None
    stored = _registry(ctx).add(spec, replace=replace, force_env=forced)
    sealed = ", ".join(f"{f}.{k}" for f, k, _ in stored.secret_fields())
    note = f"; sealed {sealed}" if sealed else ""
    click.echo(f"registered {stored.name} ({stored.transport}){note}", err=True)


@servers.command("remove")
@click.argument("name")
@click.pass_context
def remove_server(ctx: click.Context, name: str) -> None:
    """Unregister server NAME (receipts that name it are kept)."""
    from chit.servers import ConfigError

    registry = _registry(ctx)
    try:
        removed = registry.remove(name).name
    except ConfigError:
        # The file holds a table no chit can read (perhaps this very one, e.g. a name
        # with a newline written by an older chit): removing it is the way out.
        if not registry.remove_unparsable(name):
            raise
        removed = name
    click.echo(f"removed {removed!r}" if "\n" in removed else f"removed {removed}", err=True)


@servers.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--replace", is_flag=True, help="Overwrite servers that are already registered.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def import_servers(ctx: click.Context, file: str, replace: bool, as_json: bool) -> None:
    """Import the "mcpServers" of a Claude Desktop, Claude Code or Cursor config FILE.

    Every entry is reported as imported or skipped (with the reason); the registry is
    written once, all or nothing.
    """
    from pathlib import Path

    from chit.servers import import_mcp_servers

    report = import_mcp_servers(Path(file), _registry(ctx), replace=replace)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    from chit.cli.output import printable

    # Names and reasons quote the imported file, which may come from any repository.
    for item in report.imported:
        verb = "replaced" if item.replaced else "imported"
        notes = f" - {'; '.join(item.notes)}" if item.notes else ""
        click.echo(printable(f"{verb} {item.name} ({item.transport}){notes}"))
    for skip in report.skipped:
        click.echo(printable(f"skipped {skip.name}: {skip.reason}"))


@click.command("tools")
@click.argument("server")
@click.argument("tool", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=20.0,
    show_default=True,
    help="Seconds to wait for the server.",
)
@click.pass_context
def tools(ctx: click.Context, server: str, tool: str | None, as_json: bool, timeout: float) -> None:
    """List SERVER's tools with their task support (required/optional/forbidden).

    With TOOL: that tool's description, task support and arguments (its input schema).
    Asks through the home's engine (the daemon's session of SERVER unless --no-daemon),
    so a stdio server is not started a second time.
    """
    from chit.cli.engine import run_engine, use_daemon

    _registry(ctx).get(server)  # an unknown name exits 3 here, without starting anything

    async def work(engine: Engine) -> ToolsInfo:
        return await engine.tools(server, timeout=timeout)

    if use_daemon(ctx):
        listing = run_engine(ctx, work)
    else:
        # In process, a connection of its own: no engine, so no data key needed.
        import anyio

        from chit.cli.context import home_of
        from chit.engine.local import tools_once

        listing = anyio.run(tools_once, home_of(ctx).ensure(), server, timeout)
    if tool is not None:
        _one_tool(listing, tool, as_json)
        return
    if as_json:
        click.echo(json.dumps(listing.model_dump(mode="json"), indent=2))
        return
    ext = {True: "declared", False: "not declared", None: "n/a"}[listing.extension_declared]
    from chit.cli.output import printable

    click.echo(
        printable(
            f"# {listing.server}: {listing.server_name or '?'} {listing.server_version or ''}"
        ).rstrip()
        + printable(f", protocol {listing.protocol_version}, tasks: {listing.tasks_detail}")
        + f", tasks extension: {ext}"
    )
    rows = [["TOOL", "TASKS", "TITLE"]]
    for t in listing.tools:
        about = (t.title or t.description or "").strip().splitlines()
        rows.append([t.name, t.task_support, about[0][:70] if about else ""])
    _table(rows)


def _one_tool(listing: Any, name: str, as_json: bool) -> None:
    """Print one tool of ``listing`` (exit 3 naming the others when it has no such tool)."""
    from chit.cli.schema_text import plain, tool_lines
    from chit.errors import NotFound

    found = next((t for t in listing.tools if t.name == name), None)
    if found is None:
        names = [plain(t.name, 60) for t in listing.tools]
        shown = ", ".join(names[:40]) + (" …" if len(names) > 40 else "")
        raise NotFound(
            f"server {listing.server!r} has no tool {plain(name, 60)!r}; "
            + (f"its tools: {shown}" if names else "it lists no tools")
        )
    if as_json:
        doc = {"server": listing.server, **found.model_dump(mode="json")}
        click.echo(json.dumps(doc, indent=2))
        return
    for line in tool_lines(listing.server, found):
        click.echo(line)


COMMANDS: list[click.Command] = [servers, tools]
