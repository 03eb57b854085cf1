"""The :class:`Redactor`: a fixed set of secrets, replaced in any spelling."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from chit.redaction.spelling import decode, fold

FRAGMENT: Final = 8
"""A run of this many consecutive characters of a secret is redacted wherever it is."""

MIN_SECRET: Final = 4
"""Shorter values are not redacted (they would match ordinary text everywhere)."""

MEMO_MAX: Final = 1000
"""Longest text a redactor remembers its last result for (status messages are short)."""

_BLOCK: Final = FRAGMENT // 2
# Any run of FRAGMENT characters of a secret contains one whole aligned block of _BLOCK
# characters, so "no block of the secret occurs" proves "no fragment occurs" cheaply.


@dataclass(frozen=True, slots=True)
class Secret:
    """A value that must never appear in text chit keeps, and what replaces it.

    Attributes:
        value: the plaintext (a task handle, a header or env value).
        marker: the replacement, e.g. ``task#3f2a9c1e0b7d`` or ``secret#api.headers.X``.
    """

    value: str
    marker: str

    def __repr__(self) -> str:
        return f"Secret(marker={self.marker!r})"  # never the value


def task_marker(fingerprint: str) -> str:
    """The replacement of a task handle: ``task#<fingerprint>``."""
    return f"task#{fingerprint}"


def secret_marker(server: str, field: str, key: str) -> str:
    """The replacement of a configuration secret: ``secret#<server>.<field>.<key>``."""
    return f"secret#{server}.{field}.{key}"


def handle_secret(handle: str, fingerprint: str) -> Secret:
    """The :class:`Secret` for a task handle with its vault fingerprint."""
    return Secret(handle, task_marker(fingerprint))


_SCHEME_VALUE = re.compile(r"^\s*[A-Za-z][A-Za-z0-9._~+/-]*\s+(\S.*?)\s*$", re.DOTALL)


def config_secrets(server: str, field: str, key: str, value: str) -> list[Secret]:
    """The secrets one configuration value holds: itself, and its credential part.

    ``Bearer <token>`` also yields ``<token>`` (a server may echo the token alone), and a
    URL with a password (``postgres://u:pw@host``) also yields the password.
    """
    marker = secret_marker(server, field, key)
    parts = [value]
    scheme = _SCHEME_VALUE.match(value)
    if scheme is not None:
        parts.append(scheme.group(1))
    if "://" in value and "@" in value:
        try:
            password = urlsplit(value.strip()).password
        except ValueError:
            password = None
        if password:
            parts.append(unquote(password))
    return [Secret(p, marker) for p in dict.fromkeys(parts) if len(p) >= MIN_SECRET]


@dataclass(frozen=True, slots=True)
class _Prepared:
    marker: str
    folded: str
    blocks: tuple[str, ...]
    grams: Mapping[str, tuple[int, ...]]  # FRAGMENT-long substrings → their positions


@lru_cache(maxsize=8192)
def _prepare(secret: Secret) -> _Prepared:
    folded = fold(secret.value)
    n = len(folded)
    if n < FRAGMENT:
        return _Prepared(secret.marker, folded, (folded[:_BLOCK],), {})
    blocks = tuple(dict.fromkeys(folded[k : k + _BLOCK] for k in range(0, n - _BLOCK + 1, _BLOCK)))
    grams: dict[str, list[int]] = {}
    for p in range(n - FRAGMENT + 1):
        grams.setdefault(folded[p : p + FRAGMENT], []).append(p)
    return _Prepared(secret.marker, folded, blocks, {g: tuple(ps) for g, ps in grams.items()})


def _find(prep: _Prepared, folded: str) -> list[tuple[int, int]]:
    """Ranges of ``folded`` (decoded positions) that spell ``prep``'s secret or a fragment."""
    found: list[tuple[int, int]] = []
    value, n = prep.folded, len(prep.folded)
    if n < FRAGMENT:
        at = folded.find(value)
        while at >= 0:
            found.append((at, at + n))
            at = folded.find(value, at + n)
        return found
    i, end = 0, len(folded) - FRAGMENT + 1
    while i < end:
        positions = prep.grams.get(folded[i : i + FRAGMENT])
        if positions is None:
            i += 1
            continue
        best = FRAGMENT
        for p in positions:
            k = FRAGMENT
            while i + k < len(folded) and p + k < n and folded[i + k] == value[p + k]:
                k += 1
            best = max(best, k)
        # Whitespace at the edges of a fragment says nothing about the secret; keeping
        # it would swallow the space before a marker ("Bearer sk-…" vs " sk-…").
        a, b = i, i + best
        while a < b and folded[a].isspace():
            a += 1
        while b > a and folded[b - 1].isspace():
            b -= 1
        if a < b:
            found.append((a, b))
        i += best
    return found


class Redactor:
    """Replaces a fixed set of secrets in text (immutable; cheap to build and share).

    Args:
        secrets: the secrets; values shorter than ``MIN_SECRET`` are ignored.
    """

    __slots__ = ("_by_block", "_last", "_prepared", "secrets")

    def __init__(self, secrets: Iterable[Secret] = ()) -> None:
        unique = {s.value: s for s in secrets if len(s.value) >= MIN_SECRET}
        self.secrets: tuple[Secret, ...] = tuple(unique.values())
        self._prepared = tuple(_prepare(s) for s in self.secrets)
        self._by_block: dict[str, list[int]] | None = None
        # The last text redacted and its result: a receipt's redactor (its handle, its
        # server's secrets) sees the same status message check after check. A new set of
        # secrets is a new Redactor, so the memo never outlives what it was made with.
        self._last: tuple[str, str] | None = None
        if len(self._prepared) > 16:
            # Many secrets (the process-wide registry): find candidates by one scan of
            # the text instead of one substring search per secret.
            index: dict[str, list[int]] = {}
            for n, prep in enumerate(self._prepared):
                for block in prep.blocks:
                    index.setdefault(block, []).append(n)
            self._by_block = index

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __repr__(self) -> str:
        return f"Redactor({len(self.secrets)} secrets)"

    def plus(self, *secrets: Secret) -> Redactor:
        """A redactor for these secrets and ``secrets``."""
        return Redactor((*self.secrets, *secrets))

    def _candidates(self, folded: str) -> list[_Prepared]:
        if self._by_block is None:
            return [p for p in self._prepared if any(b in folded for b in p.blocks)]
        hits: set[int] = set()
        index = self._by_block
        for i in range(len(folded) - _BLOCK + 1):
            found = index.get(folded[i : i + _BLOCK])
            if found is not None:
                hits.update(found)
        return [self._prepared[n] for n in sorted(hits)]

    def text(self, text: str) -> str:
        """``text`` with every spelling of every secret (or a fragment) replaced."""
        if not text or not self._prepared:
            return text
        last = self._last
        if last is not None and last[0] == text:
            return last[1]
        redacted = self._text(text)
        if len(text) <= MEMO_MAX:
            self._last = (text, redacted)  # one tuple, replaced whole: safe across threads
        return redacted

    def _text(self, text: str) -> str:
        decoded = decode(text)
        candidates = self._candidates(decoded.folded)
        if not candidates:
            return text
        ranges: list[tuple[int, int, str]] = []
        for prep in candidates:
            ranges.extend((a, b, prep.marker) for a, b in _find(prep, decoded.folded))
        if not ranges:
            return text
        ranges.sort(key=lambda r: (r[0], -r[1]))
        out: list[str] = []
        cursor = 0  # in decoded positions
        text_at = 0
        for first, last, marker in ranges:
            if first < cursor:
                if last <= cursor:
                    continue
                first = cursor  # overlapping matches of two secrets: one marker each
            start, stop = decoded.span(first, last)
            out.append(text[text_at:start])
            out.append(marker)
            text_at, cursor = stop, last
        out.append(text[text_at:])
        return "".join(out)

    def optional(self, text: str | None) -> str | None:
        """:meth:`text` for an optional string."""
        return None if text is None else self.text(text)

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string (and mapping key) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value

    def finds(self, text: str) -> bool:
        """True when ``text`` holds a secret (or a fragment of one) in any spelling."""
        return bool(text) and self.text(text) != text


NOTHING: Final = Redactor()
"""A redactor with no secrets (text passes unchanged)."""
