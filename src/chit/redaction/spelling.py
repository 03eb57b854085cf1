"""Undoing the ways a value can be spelled in text: percent, JSON/Python and HTML escapes.

``decode(text)`` gives the text with every escape undone and lower-cased, with a map from
each decoded character back to the span of ``text`` that spelled it, so a match found in
the decoded text is replaced in the original.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Decoded", "decode", "fold"]

_ESCAPES = re.compile(
    r"%(?:25)*(?P<pct>[0-9A-Fa-f]{2})"
    r"|\\+(?:u(?P<u>[0-9A-Fa-f]{4})|U(?P<U>[0-9A-Fa-f]{8})|x(?P<x>[0-9A-Fa-f]{2})"
    r"|(?P<c>[^uUx]))"
    r"|&(?:#(?:[xX](?P<hx>[0-9A-Fa-f]{1,6})|(?P<dec>[0-9]{1,7}))|(?P<ent>amp|lt|gt|quot|apos));",
    re.DOTALL,
)
_SHORT = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}
_ENTITY = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


def fold(text: str) -> str:
    """Lower-case ``text`` without changing its length (positions must keep lining up)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A text with its escapes undone: ``folded[i]`` spans ``text[starts[i]:ends[i]]``."""

    folded: str
    starts: tuple[int, ...] | None  # None: no escapes, position i is character i
    ends: tuple[int, ...] | None

    def span(self, first: int, last: int) -> tuple[int, int]:
        if self.starts is None or self.ends is None:
            return first, last
        return self.starts[first], self.ends[last - 1]


def _utf8_length(lead: int) -> int:
    if lead >= 0xF0:
        return 4
    if lead >= 0xE0:
        return 3
    if lead >= 0xC0:
        return 2
    return 1


def decode(text: str) -> Decoded:
    if "%" not in text and "\\" not in text and "&" not in text:
        return Decoded(fold(text), None, None)
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pending: list[tuple[int, int, int]] = []  # percent bytes: (byte, start, end)

    def flush_bytes() -> None:
        i = 0
        while i < len(pending):
            byte, start, _ = pending[i]
            size = _utf8_length(byte)
            group = pending[i : i + size]
            if size > 1 and len(group) == size and all(0x80 <= b < 0xC0 for b, _, _ in group[1:]):
                try:
                    char = bytes(b for b, _, _ in group).decode("utf-8")
                except UnicodeDecodeError:
                    char = chr(byte)
                    group = group[:1]
            else:
                char, group = chr(byte), group[:1]
            chars.append(char)
            starts.append(start)
            ends.append(group[-1][2])
            i += len(group)
        pending.clear()

    def literal(start: int, stop: int) -> None:
        chars.extend(text[start:stop])
        starts.extend(range(start, stop))
        ends.extend(range(start + 1, stop + 1))

    pos = 0
    for m in _ESCAPES.finditer(text):
        if m.group("pct") is not None:
            if m.start() != pos:  # literal text between: the byte run ended
                flush_bytes()
                literal(pos, m.start())
            pending.append((int(m.group("pct"), 16), m.start(), m.end()))
            pos = m.end()
            continue
        flush_bytes()
        literal(pos, m.start())
        char = _escape_char(m)
        if (
            chars
            and len(char) == 1
            and 0xDC00 <= ord(char) <= 0xDFFF
            and 0xD800 <= ord(chars[-1]) <= 0xDBFF
            and ends[-1] == m.start()
        ):
            # A JSON surrogate pair (\ud83d\ude00) is one character.
            high = ord(chars[-1])
            chars[-1] = chr(0x10000 + ((high - 0xD800) << 10) + (ord(char) - 0xDC00))
            ends[-1] = m.end()
        else:
            chars.append(char)
            starts.append(m.start())
            ends.append(m.end())
        pos = m.end()
    flush_bytes()
    literal(pos, len(text))
    folded = [c.lower() if len(c) == 1 and len(c.lower()) == 1 else c[:1] for c in chars]
    return Decoded("".join(folded), tuple(starts), tuple(ends))


def _escape_char(m: re.Match[str]) -> str:
    for name in ("u", "U", "x", "hx"):
        value = m.group(name)
        if value is not None:
            return _chr(int(value, 16))
    if m.group("dec") is not None:
        return _chr(int(m.group("dec")))
    if m.group("ent") is not None:
        return _ENTITY[m.group("ent")]
    c = m.group("c")
    return _SHORT.get(c, c)


def _chr(code: int) -> str:
    return chr(code) if 0 <= code <= 0x10FFFF else "\ufffd"
