"""``chit doctor``: where chit keeps things and whether each part is usable."""

from __future__ import annotations

import platform
import sqlite3
from typing import Any

import click

from chit import __version__
from chit.cli.context import home_of


def _version(dist: str) -> str | None:
    from importlib import metadata  # heavy (email, zipfile): doctor only

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def collect(ctx: click.Context) -> dict[str, Any]:
    """Gather the doctor report without creating keys, key files or databases."""
    from chit.errors import ChitError
    from chit.runtime.keys import diagnose_home_key
    from chit.store import SCHEMA_VERSION, Store, StoreError

    home = home_of(ctx)
    report: dict[str, Any] = {
        "home": str(home.root),
        "home_exists": home.root.exists(),
        "home_problem": None,
        "config": str(home.config_path),
        "config_exists": home.config_path.exists(),
        "config_problem": _config_problem(home),
    }
    try:
        home.check()
    except ChitError as exc:
        report["home_problem"] = exc.message
    db: dict[str, Any] = {
        "path": str(home.db_path),
        "exists": home.db_path.exists(),
        "schema_version": None,
        "supported_schema_version": SCHEMA_VERSION,
        "receipts": None,
        "ok": None,
        "error": None,
    }
    if home.db_path.exists() or home.db_path.is_symlink():
        try:
            # Read only: doctor works on a home it cannot write, and changes nothing.
            with Store.open_readonly(home) as store:
                db["schema_version"] = store.schema_version
                db["receipts"] = store.receipts.count()
                lines = store.quick_check()
                # quick_check answers ["ok"] when sound, else one line per problem.
                db["ok"] = lines == ["ok"]
                if not db["ok"]:
                    db["error"] = "; ".join(lines[:3])
        except (ChitError, StoreError, sqlite3.Error) as exc:
            db["ok"] = False
            db["error"] = getattr(exc, "message", None) or str(exc)
    report["database"] = db
    report["stores"] = _stores(home)
    report["key_store"] = diagnose_home_key(home)
    report["versions"] = {
        "chit": __version__,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "mcp": _version("mcp"),
        "textual": _version("textual"),
        "keyring": _version("keyring"),
        "cryptography": _version("cryptography"),
        "sqlite-utils": _version("sqlite-utils"),
    }
    return report


def _config_problem(home: Any) -> str | None:
    """Why ``config.toml`` cannot be used, or None (missing is fine)."""
    from chit.servers import ConfigError, Registry

    try:
        Registry(home.config_path, _no_vault).servers()
    except ConfigError as exc:
        return exc.message
    return None


def _no_vault() -> Any:
    raise AssertionError("doctor never opens sealed values")


def _stores(home: Any) -> dict[str, Any]:
    """The server stores (``chit demo-server``'s tasks, the sidecar's): where, reachable."""
    from chit.cli.stores import configured_store, probe_store
    from chit.demo.server import default_db_path
    from chit.errors import ChitError

    stores: dict[str, Any] = {}
    defaults = {"tasks": str(default_db_path(home)), "sidecar": str(home.sidecar_db_path)}
    for key, default in defaults.items():
        try:
            target = configured_store(home, key) or default
        except ChitError as exc:
            stores[key] = {"kind": None, "location": None, "ok": False, "error": str(exc)}
            continue
        stores[key] = probe_store(target)
    return stores


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Report paths, the database, the key store and versions (read-only)."""
    from chit.cli.output import emit_json

    report = collect(ctx)
    if as_json:
        emit_json(report)
        return
    db, ks = report["database"], report["key_store"]
    home_note = "" if report["home_exists"] else " (not created yet)"
    if report["home_problem"]:
        home_note = f" PROBLEM: {report['home_problem']}"
    click.echo(f"home        {report['home']}{home_note}")
    config_note = "" if report["config_exists"] else " (none)"
    if report["config_problem"]:
        config_note = f" PROBLEM: {report['config_problem']}"
    click.echo(f"config      {report['config']}{config_note}")
    if db["exists"]:
        state = "ok" if db["ok"] else f"PROBLEM: {db['error']}"
        click.echo(
            f"database    {db['path']} schema {db['schema_version']}, "
            f"{db['receipts']} receipts, {state}"
        )
    else:
        click.echo(f"database    {db['path']} (not created yet)")
    for key, store in report["stores"].items():
        label = key.ljust(11)
        if store["error"]:
            state = f"PROBLEM: {store['error']}"
        elif store["kind"] == "postgresql":
            schema = ", ".join(f"{c} schema {v}" for c, v in sorted(store["schema"].items()))
            state = "reachable" + (f", {schema}" if schema else ", not created yet")
        else:
            state = "present" if store["ok"] else "not created yet"
        click.echo(f"{label} {store['location']} ({store['kind']}): {state}")
    usable = "usable" if ks["usable"] else "UNAVAILABLE"
    click.echo(f"key store   {ks['kind']} ({ks['backend'] or 'no backend'}): {usable}")
    if ks.get("why"):
        click.echo(f"            why: {ks['why']}")
    if ks.get("fix"):
        click.echo(f"            fix: {ks['fix']}")
    versions = ", ".join(f"{k} {v}" for k, v in report["versions"].items() if v)
    click.echo(f"versions    {versions}")


COMMANDS = [doctor]
