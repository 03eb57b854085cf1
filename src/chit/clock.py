"""The one clock of chit.

Code never calls ``datetime.now()`` or ``time.time()`` directly: it asks this module, so
tests (and snapshot tests of the TUI) can freeze or advance time deterministically.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

_frozen: datetime | None = None
_mono_offset: float = 0.0


def now() -> datetime:
    """Return the current time as an aware UTC datetime (frozen in tests)."""
    if _frozen is not None:
        return _frozen
    return datetime.now(UTC)


def monotonic() -> float:
    """Return a monotonic clock reading in seconds (shifted by ``advance`` when frozen)."""
    return time.monotonic() + _mono_offset


def wall() -> float:
    """Return the current time as a POSIX timestamp (frozen in tests)."""
    return now().timestamp()


def iso(dt: datetime | None = None) -> str:
    """Format ``dt`` (default: now) as ISO 8601 UTC with milliseconds and a ``Z`` suffix."""
    value = (dt or now()).astimezone(UTC)
    # isoformat() is C and ~4x faster than strftime (and zero-pads the year, which
    # strftime does not on glibc); for UTC it ends in "+00:00". This runs several
    # times per receipt write.
    return value.isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_iso(text: str) -> datetime:
    """Parse an ISO 8601 timestamp (``Z`` or offset) into an aware UTC datetime.

    Raises:
        ValueError: if ``text`` is not an ISO 8601 timestamp.
    """
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def freeze(at: datetime) -> None:
    """Freeze ``now()`` at ``at`` until ``unfreeze()``."""
    global _frozen
    _frozen = at.astimezone(UTC)


def unfreeze() -> None:
    """Return to the real clock."""
    global _frozen, _mono_offset
    _frozen = None
    _mono_offset = 0.0


def advance(seconds: float) -> None:
    """Move a frozen clock (and the monotonic offset) forward by ``seconds``."""
    global _frozen, _mono_offset
    if _frozen is not None:
        _frozen = _frozen + timedelta(seconds=seconds)
    _mono_offset += seconds


@contextmanager
def frozen(at: datetime) -> Iterator[None]:
    """Context manager: freeze the clock at ``at`` for the block."""
    freeze(at)
    try:
        yield
    finally:
        unfreeze()
