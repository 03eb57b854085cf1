"""The one place ``chit.tasks`` reads the wall clock (injectable for tests)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Now = Callable[[], datetime]
"""A callable returning the current aware UTC datetime."""


def utc_now() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """Format ``moment`` as ISO 8601 UTC with milliseconds and a ``Z`` suffix."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def to_ms(moment: datetime) -> int:
    """Return ``moment`` as integer milliseconds since the epoch."""
    return int(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    """Return an aware UTC datetime for ``ms`` milliseconds since the epoch."""
    return datetime.fromtimestamp(ms / 1000, UTC)
