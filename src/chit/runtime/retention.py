"""Timeline retention, applied by whichever process reconciles, once a day.

``[retention] timeline_days`` in ``config.toml`` (default 30; 0 turns it off) is how long
a settled receipt keeps its whole timeline; after that only its first and last
observations stay (``chit.store.retention``). The lease holder checks once an hour
whether a day has passed since the last run (recorded in the store's ``meta``, so a
restart or another holder does not run it again) and runs it in a worker thread with its
own connection: a large prune never blocks the reconciler's event loop.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import datetime, timedelta

import anyio

from chit import clock
from chit.clock import Clock, current_clock
from chit.errors import ChitError, UsageError
from chit.home import Home
from chit.store import Store
from chit.store.retention import PruneResult

log = logging.getLogger("chit.runtime")

DEFAULT_DAYS = 30.0
"""How long a settled receipt keeps its whole timeline unless the config says otherwise."""

INTERVAL = timedelta(days=1)
"""How often retention runs."""

CHECK_EVERY_S = 3600.0
"""How often the lease holder asks whether a run is due."""

LAST_RUN = "retention.last_run"
"""The ``meta`` key holding when retention last ran (ISO time)."""


def timeline_days(home: Home) -> float | None:
    """``[retention] timeline_days`` of the home (default 30); None when turned off (0).

    Raises:
        UsageError: the value is not a non-negative number, or the file cannot be read.
    """
    from chit.servers.toml_io import read

    try:
        doc = read(home.config_path)
    except ChitError as exc:
        raise UsageError(str(exc)) from exc
    section = doc.get("retention", {})
    value = section.get("timeline_days", DEFAULT_DAYS) if isinstance(section, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise UsageError(
            f"[retention] timeline_days in {home.config_path} must be a number of days "
            "(0 turns retention off)"
        )
    if value == 0:
        return None
    if math.isinf(value):
        return None
    return float(value)


def apply_retention(home: Home, now: datetime) -> PruneResult | None:
    """Run retention if a day has passed since the last run (own connection; any thread).

    Returns:
        What was pruned, or None when it was not due or is turned off.
    """
    days = timeline_days(home)
    with Store.open(home) as store:
        last = store.meta.get(LAST_RUN)
        if last is not None and now - clock.parse_iso(last) < INTERVAL:
            return None
        result = None
        if days is not None:
            result = store.retention.prune(now - timedelta(days=days))
            if result.rows:
                reclaimed = store.retention.reclaim()
                log.info(
                    "retention: %d rows of %d settled timelines pruned; %d -> %d bytes",
                    result.rows,
                    result.receipts,
                    reclaimed.bytes_before,
                    reclaimed.bytes_after,
                )
        store.meta.set(LAST_RUN, clock.iso(now))
        return result


class RetentionKeeper:
    """Applies the home's retention while this process holds the reconciler lease."""

    def __init__(
        self, home: Home, *, check_every_s: float = CHECK_EVERY_S, clock: Clock | None = None
    ) -> None:
        """Check every ``check_every_s`` of ``clock`` (and at once when the lease is taken)."""
        self.home = home
        self.check_every_s = check_every_s
        self.clock = clock or current_clock()
        self.last: PruneResult | None = None

    async def run(self, stop: anyio.Event, keep_going: Callable[[], bool]) -> None:
        """Apply retention when due until ``stop`` is set or the lease is lost."""
        while not stop.is_set() and keep_going():
            await self.apply_once()
            with self.clock.move_on_after(self.check_every_s):
                await stop.wait()

    async def apply_once(self) -> PruneResult | None:
        """One check (in a worker thread); errors are logged, never raised."""
        now = self.clock.now()
        try:
            result = await anyio.to_thread.run_sync(apply_retention, self.home, now)
        except ChitError as exc:
            log.warning("retention skipped this time: %s", exc.message)
            return None
        if result is not None:
            self.last = result
        return result
