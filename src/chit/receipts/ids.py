"""Local identifiers: ULID-like, lexicographically sortable by creation time.

A receipt id is 26 Crockford base32 characters: 48 bits of milliseconds since the epoch
followed by 80 random bits. Ids are local names for receipts and intents; they are never
the server's task id (that is a secret and lives sealed in the store).
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from typing import Final

__all__ = ["id_time", "is_local_id", "new_receipt_id", "new_request_key"]

_ALPHABET: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ID_RE: Final = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
_TIME_CHARS: Final = 10
_RANDOM_BYTES: Final = 10


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def _new_id(now: datetime, randomness: bytes | None) -> str:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    millis = int(now.timestamp() * 1000)
    if not 0 <= millis < 1 << 48:
        raise ValueError("now is outside the ULID time range")
    rand = secrets.token_bytes(_RANDOM_BYTES) if randomness is None else randomness
    if len(rand) != _RANDOM_BYTES:
        raise ValueError(f"randomness must be {_RANDOM_BYTES} bytes")
    return _encode(millis, _TIME_CHARS) + _encode(int.from_bytes(rand, "big"), 16)


def new_receipt_id(now: datetime, randomness: bytes | None = None) -> str:
    """Return a new receipt id that sorts after every id made at an earlier millisecond.

    Args:
        now: the creation time (timezone-aware).
        randomness: 10 bytes to use instead of fresh random bytes (tests only).

    Returns:
        A 26-character ULID string.

    Raises:
        ValueError: if ``now`` is naive or out of range, or ``randomness`` has the wrong size.
    """
    return _new_id(now, randomness)


def new_request_key(now: datetime, randomness: bytes | None = None) -> str:
    """Return a new intent request key (same format as a receipt id).

    Args:
        now: the creation time (timezone-aware).
        randomness: 10 bytes to use instead of fresh random bytes (tests only).

    Returns:
        A 26-character ULID string.
    """
    return _new_id(now, randomness)


def is_local_id(text: str) -> bool:
    """Return True if ``text`` is a well-formed receipt id or request key (upper case)."""
    return bool(_ID_RE.match(text))


def id_time(local_id: str) -> datetime:
    """Return the creation time (millisecond precision, UTC) encoded in a local id.

    Raises:
        ValueError: if ``local_id`` is not a well-formed id.
    """
    if not is_local_id(local_id):
        raise ValueError(f"not a local id: {local_id!r}")
    millis = 0
    for char in local_id[:_TIME_CHARS]:
        millis = millis * 32 + _ALPHABET.index(char)
    return datetime.fromtimestamp(millis / 1000, tz=UTC)
