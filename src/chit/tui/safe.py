"""Server text made harmless for the screen: never markup, never a terminal control.

Every string that reaches chit from a server (tool names and titles, descriptions,
status and prompt messages, result summaries, enum titles) — and anything a person typed
that came back through the store — is shown through :func:`plain` or :func:`clean`.
Textual reads a ``str`` in a ``Static``, a ``Label``, a ``Select`` option, a
``DataTable`` cell or a toast as markup, and Rich does the same in a ``Table`` cell, so a
server could otherwise style or link text in chit (``[link=…]``) or hide it (``[/]``).
A :class:`rich.text.Text` is never parsed, which is why everything here returns one.
"""

from __future__ import annotations

import re

from rich.text import Text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""C0/C1 controls (not tab or newline), line separators and bidi overrides."""


def clean(value: object) -> str:
    """``value`` as a string with every control character shown as ``�``.

    An escape sequence in a status message must not move the cursor or change colours,
    and a bidi override must not reorder what a person reads.
    """
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", str(value))


def one_line(value: object) -> str:
    """:func:`clean`, with newlines and tabs folded into spaces (table cells, titles)."""
    return " ".join(clean(value).split())


def plain(value: object, style: str = "") -> Text:
    """Literal text (no markup is parsed) in ``style``, controls made visible."""
    return Text(clean(value), style=style)


def plain_line(value: object, style: str = "") -> Text:
    """:func:`plain` on one line."""
    return Text(one_line(value), style=style)
