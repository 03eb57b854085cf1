"""Acceptance checks: a small predicate language over a tool result (``--accept-if``).

A terminal task state is not a successful business outcome; the acceptance check decides
that. The language (reference: ``docs/acceptance.md``)::

    check  := or
    or     := and ("or" and)*
    and    := unary ("and" unary)*
    unary  := "not" unary | "(" check ")" | clause
    clause := "isError"
            | "text" "contains" STRING          STRING: a JSON string, "…"
            | "json" PATH "exists"
            | "json" PATH OP VALUE              OP: == != < <= > >=   VALUE: a JSON literal

``PATH`` is ``$.items[0].id`` / ``$["odd key"]`` or the dotted form ``items.0.id``. It is
looked up in ``structuredContent``, else in the first text block that parses as JSON.
Nothing is ever executed (no ``eval``), expressions are bounded in length and depth, and
there are deliberately no regexes: Python's backtracking ``re`` can take minutes on a few KiB
of server-supplied text (``.*.*x``), so ``text matches`` is refused with a pointer to
``contains``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from chit.receipts._acceptance_json import (
    DECODER,
    MISSING,
    NAME,
    PathStep,
    compare,
    depth,
    dumps,
    json_source,
    lookup,
    render_path,
    show,
)

__all__ = [
    "CHECK_MAX",
    "AcceptanceSyntaxError",
    "Check",
    "Verdict",
    "evaluate",
    "parse_check",
    "result_text",
]

CHECK_MAX: Final = 2000
"""Longest accepted expression, in characters."""
_DEPTH_MAX: Final = 32
_OPS: Final = ("==", "!=", "<=", ">=", "<", ">")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INDEX = re.compile(r"-?[0-9]+")
_BARE = re.compile(r"[^\s()]+")


class AcceptanceSyntaxError(ValueError):
    """An acceptance expression that does not parse; ``str()`` is one readable line."""

    def __init__(self, message: str, column: int) -> None:
        """Build the error.

        Args:
            message: what was expected and what was found.
            column: 1-based column of the problem.
        """
        super().__init__(f"column {column}: {message}")
        self.column = column
        self.detail = message


@dataclass(frozen=True, slots=True)
class Verdict:
    """The result of an acceptance check: accepted or not, and the deciding clause."""

    accepted: bool
    why: str


@dataclass(frozen=True, slots=True)
class _IsError:
    pass


@dataclass(frozen=True, slots=True)
class _Contains:
    needle: str


@dataclass(frozen=True, slots=True)
class _Json:
    path: tuple[PathStep, ...]
    op: str  # "exists" or a comparison
    value: Any = None


@dataclass(frozen=True, slots=True)
class _Not:
    inner: Node


@dataclass(frozen=True, slots=True)
class _Bool:
    op: str  # "and" | "or"
    items: tuple[Node, ...]


Node: TypeAlias = _IsError | _Contains | _Json | _Not | _Bool


@dataclass(frozen=True, slots=True)
class Check:
    """A parsed acceptance check; ``text`` is its normalized spelling (parses to itself)."""

    node: Node

    @property
    def text(self) -> str:
        """The normalized expression, e.g. ``not isError and json $.ok == true``."""
        return _render(self.node)


def _render(node: Node, parent: str | None = None) -> str:
    match node:
        case _IsError():
            return "isError"
        case _Contains(needle):
            return f"text contains {dumps(needle)}"
        case _Json(path, "exists"):
            return f"json {render_path(path)} exists"
        case _Json(path, op, value):
            return f"json {render_path(path)} {op} {dumps(value)}"
        case _Not(inner):
            return f"not {_render(inner, 'not')}"
        case _Bool(op, items):
            text = f" {op} ".join(_render(item, op) for item in items)
            return f"({text})" if parent is not None and parent != op else text
    raise AssertionError(node)  # pragma: no cover


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, expected: str, at: int | None = None) -> AcceptanceSyntaxError:
        at = self.pos if at is None else at
        rest = self.text[at:]
        bare = _BARE.match(rest)
        found = "end of expression" if not rest else repr(bare.group() if bare else rest[0])
        return AcceptanceSyntaxError(f"expected {expected}, found {found[:40]}", at + 1)

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def word(self) -> str | None:
        self.skip()
        m = _WORD.match(self.text, self.pos)
        return m.group() if m else None

    def take(self, word: str) -> bool:
        if self.word() == word:
            self.pos += len(word)
            return True
        return False

    def parse(self) -> Node:
        node = self.boolean("or")
        self.skip()
        if self.pos < len(self.text):
            raise self.fail('"and", "or" or the end')
        return node

    def boolean(self, op: str) -> Node:
        sub: Callable[[], Node] = self.unary if op == "and" else lambda: self.boolean("and")
        items = [sub()]
        while self.take(op):
            items.append(sub())
        if len(items) == 1:
            return items[0]
        flat = [i for n in items for i in (n.items if isinstance(n, _Bool) and n.op == op else [n])]
        return _Bool(op, tuple(flat))

    def unary(self) -> Node:
        self.skip()
        self.depth += 1
        if self.depth > _DEPTH_MAX:
            raise self.fail(f"at most {_DEPTH_MAX} nested 'not'/parentheses")
        try:
            self.skip()
            if self.take("not"):
                return _Not(self.unary())
            if self.text.startswith("(", self.pos):
                self.pos += 1
                node = self.boolean("or")
                self.skip()
                if not self.text.startswith(")", self.pos):
                    raise self.fail('")"')
                self.pos += 1
                return node
            return self.clause()
        finally:
            self.depth -= 1

    def clause(self) -> Node:
        if self.take("isError"):
            return _IsError()
        if self.take("text"):
            if self.take("contains"):
                return _Contains(self.string())
            if self.word() == "matches":
                raise self.fail(
                    '"contains" ("matches" is not offered: regexes can backtrack '
                    "without bound on server text)"
                )
            raise self.fail('"contains" or "matches" after "text"')
        if self.take("json"):
            path = self.path()
            if self.take("exists"):
                return _Json(path, "exists")
            self.skip()
            op = next((o for o in _OPS if self.text.startswith(o, self.pos)), None)
            if op is None:
                raise self.fail('"exists" or a comparison (== != < <= > >=) after the path')
            self.pos += len(op)
            return _Json(path, op, self.literal())
        raise self.fail('"isError", "text", "json", "not" or "("')

    def string(self) -> str:
        self.skip()
        if not self.text.startswith('"', self.pos):
            raise self.fail("a double-quoted string")
        value = self.literal()
        if not isinstance(value, str):  # pragma: no cover - a '"' always decodes to str
            raise self.fail("a string")
        return value

    def literal(self) -> Any:
        self.skip()
        start = self.pos
        try:
            value, end = DECODER.raw_decode(self.text, start)
        except (ValueError, RecursionError):
            raise self.fail(
                'a JSON value (strings in "double quotes", true, false, null, 1.5)'
            ) from None
        if depth(value) > _DEPTH_MAX:
            raise self.fail(f"a JSON value nested at most {_DEPTH_MAX} deep")
        self.pos = end
        return value

    def path(self) -> tuple[PathStep, ...]:
        self.skip()
        steps: list[PathStep] = []
        if self.text.startswith("$", self.pos):
            self.pos += 1
        else:
            steps.append(self.segment())
        while self.pos < len(self.text) and self.text[self.pos] in ".[":
            if self.text[self.pos] == ".":
                self.pos += 1
                steps.append(self.segment())
                continue
            self.pos += 1
            if self.text.startswith('"', self.pos):
                steps.append(self.string())
            else:
                m = _INDEX.match(self.text, self.pos)
                if m is None:
                    raise self.fail('an index or a "key" inside [ ]')
                steps.append(int(m.group()))
                self.pos = m.end()
            if not self.text.startswith("]", self.pos):
                raise self.fail('"]"')
            self.pos += 1
        return tuple(steps)

    def segment(self) -> PathStep:
        m = NAME.match(self.text, self.pos) or _INDEX.match(self.text, self.pos)
        if m is None or m.group().startswith("-"):
            raise self.fail("a path like $.items[0].id or items.0.id")
        self.pos = m.end()
        text = m.group()
        return int(text) if text.isdigit() else text


def parse_check(text: str) -> Check:
    """Parse an acceptance expression.

    Args:
        text: the expression, e.g. ``not isError and text contains "done"``.

    Returns:
        The parsed check; ``check.text`` is its normalized spelling.

    Raises:
        AcceptanceSyntaxError: with the column and what was expected.
    """
    if not isinstance(text, str):
        raise AcceptanceSyntaxError("expected the expression as text", 1)
    if len(text) > CHECK_MAX:
        raise AcceptanceSyntaxError(f"expected at most {CHECK_MAX} characters", CHECK_MAX + 1)
    if not text.strip():
        raise AcceptanceSyntaxError("expected a check such as 'not isError', found nothing", 1)
    return Check(_Parser(text).parse())


def result_text(result: Mapping[str, Any]) -> str:
    """The text blocks of a ``CallToolResult`` (as a dict), joined by newlines."""
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    return "\n".join(
        b["text"]
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _leaf(node: Node, result: Mapping[str, Any]) -> tuple[bool, str]:
    match node:
        case _IsError():
            flag = result.get("isError") is True
            return flag, f"isError is {'true' if flag else 'false'}"
        case _Contains(needle):
            text = result_text(result)
            found = needle in text
            return found, f"{'found' if found else 'not found'} in {len(text)} characters of text"
        case _Json(path, op, value):
            root, source = json_source(result)
            if root is MISSING:
                return False, source
            found, missing = lookup(root, path)
            if found is MISSING:
                return False, f"{missing} in {source}"
            ok = True if op == "exists" else compare(found, op, value)
            if ok is None:
                ok, source = False, f"{source}; it cannot be compared with {op}"
            return ok, f"{render_path(path)} is {show(found)} in {source}"
    raise AssertionError(node)  # pragma: no cover


def _eval(node: Node, result: Mapping[str, Any]) -> tuple[bool, str]:
    if isinstance(node, _Bool):
        results = [_eval(item, result) for item in node.items]
        deciding = node.op == "or"  # "and" is decided by a False, "or" by a True
        hit = next((r for r in results if r[0] is deciding), None)
        return hit or (not deciding, "; ".join(why for _, why in results))
    nots = 0
    inner: Node = node
    while isinstance(inner, _Not):
        inner, nots = inner.inner, nots + 1
    if isinstance(inner, _Bool):  # "not (a or b)": explain by the inner expression
        value, detail = _eval(inner, result)
        detail = f"[{detail}]"
    else:
        value, detail = _leaf(inner, result)
    return value != (nots % 2 == 1), f"{_render(node)}: {detail}"


def evaluate(check: Check, result: Mapping[str, Any]) -> Verdict:
    """Evaluate ``check`` on a tool result.

    Args:
        check: a parsed check.
        result: the ``CallToolResult`` as a dict (``content``, ``structuredContent``,
            ``isError``).

    Returns:
        The verdict; ``why`` names the clause that decided it and what was seen.
    """
    accepted, why = _eval(check.node, result if isinstance(result, Mapping) else {})
    return Verdict(accepted, why)
