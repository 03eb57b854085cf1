"""Keyset pagination: an opaque cursor and the page it continues."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from chit.errors import UsageError

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of results; ``next_cursor`` is ``None`` on the last page."""

    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None

    def __len__(self) -> int:
        return len(self.items)


def encode_cursor(sort_key: str, row_id: str) -> str:
    """Encode the last row's sort key and id (opaque to callers, URL-safe)."""
    raw = f"{sort_key}\x1f{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """Decode ``encode_cursor``'s output.

    Raises:
        UsageError: the cursor is malformed.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        sort_key, row_id = raw.split("\x1f")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise UsageError("invalid page cursor") from exc
    return sort_key, row_id


def like_pattern(text: str) -> str:
    """Return a ``LIKE … ESCAPE '\\'`` pattern matching ``text`` anywhere, literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
