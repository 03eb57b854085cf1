"""Is a store file's schema exactly this chit's? One plain-SQL answer, no sqlite-utils.

The migrations are :mod:`chit.store.migrations` (sqlite-utils' ``Migrations``, each one
named in its ``@migrations(name=...)`` line): that list is the one source of truth for
what a current store has applied. Importing the module imports sqlite-utils, though
(with click, pluggy and dateutil: about a quarter of a second), which a cold read of a
current store never needs. So the names are taken from the module's *source* — the
decorator lines, in order — without running it; only where no source is installed
(bytecode-only) is the module imported and asked. ``tests/test_store_reader.py`` checks
that the two ways give the same names.

:func:`is_current` is the check both :class:`~chit.store.reader.StoreReader` and
``Store.open_readonly`` make before reading; anything but "exactly current" (older,
newer, unreadable) is left to ``chit.store.migrations``, which migrates or refuses it.
"""

from __future__ import annotations

import importlib.util
import re
import sqlite3
from functools import cache
from pathlib import Path

_MODULE = "chit.store.migrations"
_SET = re.compile(r'^MIGRATION_SET = "([^"\n]+)"$', re.MULTILINE)
_NAME = re.compile(r'^@migrations\(name="([^"\n]+)"\)$', re.MULTILINE)


@cache
def expected() -> tuple[str, tuple[str, ...]]:
    """The migration set's name and its migrations' names, in order."""
    source = _source()
    if source is not None:
        found = _SET.search(source)
        names = tuple(_NAME.findall(source))
        if found is not None and names:
            return found[1], names
    from chit.store import migrations  # no source to read: ask the module itself

    return migrations.MIGRATION_SET, tuple(migrations.KNOWN)


def _source() -> str | None:
    """The text of ``chit.store.migrations`` as installed, or None without one."""
    try:
        spec = importlib.util.find_spec(_MODULE)
        origin = spec.origin if spec is not None else None
        if origin is None or not origin.endswith(".py"):
            return None
        return Path(origin).read_text(encoding="utf-8")
    except (ImportError, OSError, ValueError):
        return None


def is_current(conn: sqlite3.Connection) -> bool:
    """True when the file has applied exactly this chit's migrations (reads only).

    ``PRAGMA user_version`` (every migration sets it to its ordinal) and the names in
    ``_sqlite_migrations`` must both match; any error reads as "not current".
    """
    migration_set, names = expected()
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != len(names):
            return False
        rows = conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", [migration_set]
        ).fetchall()
    except sqlite3.Error:
        return False
    return sorted(str(name) for (name,) in rows) == sorted(names)


def schema_version() -> int:
    """The schema version of a current store (= the number of migrations)."""
    return len(expected()[1])
