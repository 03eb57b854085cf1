"""Server health for the status line: which servers chit cannot reach, and why, in words.

A person reads "demo: the connection was refused", never an exception class name; the
transport's own wording (``unexpected failure: ExceptionGroup``) is translated here,
and anything else a server or transport said is cleaned of markup and controls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chit.tui.safe import one_line

_CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Group|Closed|EndOfStream)\b")
"""What an exception class name looks like inside a message."""

_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"refused", re.I), "the connection was refused (is the server running?)"),
    (re.compile(r"timed? ?out|did not answer within", re.I), "it did not answer in time"),
    (re.compile(r"^connection lost", re.I), "the connection was lost"),
    (re.compile(r"^unexpected failure", re.I), "it could not be reached"),
    (re.compile(r"could not be started|no such file|not found", re.I), "it could not be started"),
    (re.compile(r"name or service|getaddrinfo|resolve", re.I), "its address does not resolve"),
)


def words(reason: str | None) -> str:
    """A transport or server error as a short sentence a person can act on."""
    text = one_line(reason or "")
    for pattern, sentence in _WORDS:
        if pattern.search(text):
            return sentence
    if not text or _CLASS_NAME.fullmatch(text.split(": ")[-1]):
        return "it could not be reached"
    return _CLASS_NAME.sub("error", text)


@dataclass(frozen=True)
class ServerHealth:
    """A server with live receipts chit cannot reach right now."""

    server: str
    receipts: int
    reason: str
    """Why, in words (:func:`words`)."""
