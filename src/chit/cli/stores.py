"""Choosing a server store: ``--store URL``, else the config key, else the default file.

``config.toml`` may carry a ``[store]`` table: ``tasks = "postgresql://…"`` for
``chit demo-server`` and ``sidecar = "postgresql://…"`` for ``chit sidecar``. A value
that is not a ``postgresql://`` URL is a SQLite file path.
"""

from __future__ import annotations

from typing import Any

from chit.errors import ChitError, ExitCode
from chit.sidecar.sql import configured_store

__all__ = ["configured_store", "probe_store", "store_failure"]


def store_failure(what: str, exc: BaseException) -> ChitError:
    """One-line error (exit 5) for a store that cannot be opened."""
    message: Any = getattr(exc, "reason", None) or getattr(exc, "message", None) or str(exc)
    line = " ".join(str(message).split())
    for redundant in (f"the {what} is unavailable: ", "Task store unavailable: "):
        line = line.removeprefix(redundant)
    return ChitError(f"cannot open the {what}: {line}", exit_code=ExitCode.STORE)


def probe_store(target: str) -> dict[str, Any]:
    """Describe a store for ``chit doctor`` without creating or migrating anything.

    Returns:
        ``kind`` (sqlite/postgresql), ``location`` (a URL without its password),
        ``ok`` (reachable / present), ``schema`` (component → version), ``error``.
    """
    from chit.tasks.server.backend import is_postgres_url

    if not is_postgres_url(target):
        from pathlib import Path

        exists = Path(target).exists()
        return {"kind": "sqlite", "location": target, "ok": exists, "schema": {}, "error": None}
    from chit.tasks.server.backend import StoreUnavailable
    from chit.tasks.server.pgstore import load_psycopg, redact, split_url

    report: dict[str, Any] = {
        "kind": "postgresql",
        "location": redact(target),
        "ok": False,
        "schema": {},
        "error": None,
    }
    try:
        psycopg = load_psycopg()
        with psycopg.connect(split_url(target)[0], connect_timeout=3, autocommit=True) as conn:
            exists = conn.execute("SELECT to_regclass('chit_schema') IS NOT NULL").fetchone()
            if exists and exists[0]:
                rows = conn.execute("SELECT component, version FROM chit_schema").fetchall()
                report["schema"] = {str(c): int(v) for c, v in rows}
            report["server_version"] = conn.info.server_version
        report["ok"] = True
    except StoreUnavailable as exc:
        report["error"] = exc.reason
    except Exception as exc:  # any driver error is a finding, not a crash
        report["error"] = " ".join(str(exc).split()) or type(exc).__name__
    return report
