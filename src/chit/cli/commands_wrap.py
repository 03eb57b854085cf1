"""``chit servers wrap CONFIG`` and ``chit servers unwrap CONFIG``.

Wrap routes a host's MCP servers through ``chit proxy`` (see ``chit.servers.wrap``);
unwrap restores the original entries. stdout carries the diff (``--dry-run``) or the
report; a summary line per entry goes to stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from chit.cli.commands_servers import servers

if TYPE_CHECKING:
    from chit.servers.wrap import ProxyLaunch, WrapReport

# Settings a proxy launched by a host must share with the chit that wrapped the config.
_INHERITED_ENV = ("CHIT_KEY_STORE", "CHIT_KEY_FILE")


def proxy_launch(explicit_home: str | None) -> ProxyLaunch:
    """How a host should start ``chit proxy``: this chit's absolute path, and its home.

    Hosts start servers with a minimal environment (Claude Desktop has no shell PATH),
    so the program is an absolute path, and a home given with ``--home``/``CHIT_HOME``
    travels in the entry's ``env``.
    """
    from chit.home import resolve_home
    from chit.servers.wrap import ProxyLaunch

    env: list[tuple[str, str]] = []
    if explicit_home is not None:
        env.append(("CHIT_HOME", str(resolve_home(explicit_home).root)))
    env += [(k, os.environ[k]) for k in _INHERITED_ENV if os.environ.get(k)]
    argv0 = Path(sys.argv[0])
    if argv0.name.startswith("chit") and argv0.exists():
        return ProxyLaunch(str(argv0.resolve()), env=tuple(env))
    found = shutil.which("chit")
    if found:
        return ProxyLaunch(str(Path(found).resolve()), env=tuple(env))
    return ProxyLaunch(sys.executable, ("-m", "chit"), tuple(env))


def _show(report: WrapReport, verb: str, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    if report.dry_run and report.diff:
        click.echo(report.diff, nl=False)
    prefix = "would " if report.dry_run else ""
    for item in report.changed:
        notes = f" - {'; '.join(item['notes'])}" if item.get("notes") else ""
        click.echo(f"{prefix}{verb} {item['name']}{notes}", err=True)
    for item in report.unchanged:
        click.echo(f"unchanged {item['name']}: {item['reason']}", err=True)
    for item in report.skipped:
        click.echo(f"left alone {item['name']}: {item['reason']}", err=True)
    if report.backup:
        click.echo(f"backup: {report.backup}", err=True)
    if not report.changed:
        click.echo(f"{report.config}: nothing to {verb}", err=True)


@servers.command("wrap")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Show the diff; change nothing.")
@click.option(
    "--replace", is_flag=True, help="Overwrite a different server registered under the same name."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def wrap(ctx: click.Context, config: str, dry_run: bool, replace: bool, as_json: bool) -> None:
    """Route the servers of a host's CONFIG through chit (`chit proxy NAME`).

    Each "mcpServers" entry of a Claude Desktop, Claude Code or Cursor config is
    imported into chit's registry (secrets sealed) and rewritten to launch
    `chit proxy NAME`; a backup is kept beside the file. Idempotent; entries chit cannot
    proxy are left alone with the reason.
    """
    from chit.home import resolve_home
    from chit.servers import Registry
    from chit.servers.wrap import wrap_config

    explicit = ctx.find_root().obj.get("home")
    home = resolve_home(explicit)
    report = wrap_config(
        Path(config),
        Registry.for_home(home),
        home,
        proxy_launch(explicit),
        dry_run=dry_run,
        replace=replace,
    )
    _show(report, "wrap", as_json)


@servers.command("unwrap")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Show the diff; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def unwrap(ctx: click.Context, config: str, dry_run: bool, as_json: bool) -> None:
    """Restore the entries `chit servers wrap` changed in CONFIG, exactly as they were."""
    from chit.home import resolve_home
    from chit.servers.wrap import unwrap_config

    home = resolve_home(ctx.find_root().obj.get("home"))
    _show(unwrap_config(Path(config), home, dry_run=dry_run), "unwrap", as_json)


COMMANDS: list[click.Command] = []
"""The commands join the ``servers`` group; nothing is added at the top level."""
