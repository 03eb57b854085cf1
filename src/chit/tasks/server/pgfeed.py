"""The PostgreSQL task store's change feed: ``LISTEN chit_tasks`` on a connection of its own.

Every task row written fires ``pg_notify`` from a trigger (``pgschema``); each replica
listens and hands the changes *other* processes made (the payload's ``origin`` is the
writer's ``application_name``) to the runtime. When the connection is lost it reconnects
with backoff, and after every (re)connect it reports ``(None, None)``: notifications
sent while nobody listened are gone, so the runtime re-reads what it watches.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

from chit.tasks.server.backend import ChangeCallback
from chit.tasks.server.pgschema import CHANNEL

logger = logging.getLogger(__name__)


async def follow_changes(
    psycopg: Any,
    conninfo: str,
    connect_kwargs: dict[str, Any],
    origin: str,
    on_change: ChangeCallback,
) -> None:
    """Listen until cancelled, reporting other processes' changes to ``on_change``.

    Reconnects with backoff (0.2 s doubling to 5 s) when the connection is lost.
    """
    delay = 0.2
    failing = False
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, **connect_kwargs)
            async with conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                if failing:
                    logger.warning("task store change feed is back")
                failing, delay = False, 0.2
                on_change(None, None)
                async for note in conn.notifies():
                    dispatch(note.payload, origin, on_change)
        except psycopg.OperationalError as exc:
            if not failing:
                reason = " ".join(str(exc).split())
                logger.warning("task store change feed lost (%s); reconnecting", reason)
            failing = True
        await anyio.sleep(delay)
        delay = min(delay * 2, 5.0)


def dispatch(payload: str, origin: str, on_change: ChangeCallback) -> None:
    """Decode one notification; report it unless this process caused it."""
    try:
        data = json.loads(payload)
        task_id, status = str(data["id"]), str(data["status"])
    except (ValueError, KeyError, TypeError):
        return  # not ours (another program on the channel): ignore
    if data.get("origin") == origin:
        return  # this process's own write: it already reacted
    on_change(task_id, None if data.get("kept") else status)
