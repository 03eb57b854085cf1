"""Pending input requests on a terminal: how ``chit show`` lists them, how the prompt asks.

Both work on plain data — an :class:`~chit.receipts.InputRequest` and the
:class:`~chit.receipts.forms.Form` built from its schema — so they serve the in-process
engine and the daemon's clients alike. Everything a server wrote (messages, titles,
option names) is made printable before it reaches the terminal.

The prompt asks field by field and never gives up on a typo: a value that does not fit
(``coerce`` says why) is said in one line and asked again; an empty answer takes the
default (or leaves an optional field out). Only a request chit cannot build a form for is
refused, with what to do instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from chit.errors import UsageError
from chit.receipts import InputKind, InputRequest
from chit.receipts.answers import answer_problems, validate_answer
from chit.receipts.forms import Field, Form, FormInputError, coerce, form_from_schema, to_text

Ask = Callable[[str, str | None], str]
"""``ask(label, default_text)`` → what the person typed (the default when they typed nothing)."""

Say = Callable[[str], None]
"""Show one line to the person (stderr: stdout carries data only)."""

MAX_OPTIONS = 20
"""Options listed per field (then "… and N more")."""

_KIND_NAMES = {
    "string": "text",
    "email": "email address",
    "uri": "URL",
    "date": "date, YYYY-MM-DD",
    "datetime": "date-time, ISO 8601",
    "number": "number",
    "integer": "whole number",
    "boolean": "yes/no",
    "enum": "one of",
    "multi_enum": "any of, comma-separated",
}


def printable(text: str, limit: int = 200) -> str:
    """Server text as one printable line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    shown = "".join(c if c.isprintable() else "?" for c in flat)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def request_lines(request: InputRequest, indent: str = "  ") -> list[str]:
    """What a person needs to answer ``request``: its message and every field.

    Each field line names the field, its type (required or not), its bounds and default;
    options follow one per line as ``value — title``.
    """
    lines = _message_lines(request, indent)
    if request.kind is InputKind.URL or request.url:
        lines.append(f"{indent}visit: {printable(request.url or '?', 500)}")
        return lines
    if not _is_form(request):
        lines.append(f"{indent}({request.kind.value} request: answer with chit answer --json)")
        return lines
    form = form_from_schema(request.requested_schema or {})
    for field in form.fields:
        lines += field_lines(field, indent)
    lines += [f"{indent}note: {printable(note)}" for note in form.unsupported]
    return lines


MAX_MESSAGE_LINES = 40
"""Lines of a sampling request's conversation shown (then "… N more lines")."""


def _is_form(request: InputRequest) -> bool:
    """An elicitation, or a sampling/roots question chit made a form for (chit proxy)."""
    return request.kind is InputKind.ELICITATION or (
        request.kind in (InputKind.SAMPLING, InputKind.ROOTS)
        and request.requested_schema is not None
    )


def _message_lines(request: InputRequest, indent: str) -> list[str]:
    """The request's message: one line, or a sampling request's conversation line by line."""
    message = request.message or "the server asks for input"
    if request.kind is not InputKind.SAMPLING:
        return [f"{indent}{printable(message)}"]
    parts = message.splitlines() or [""]
    lines = [f"{indent}{printable(part, 500)}" for part in parts[:MAX_MESSAGE_LINES]]
    if len(parts) > MAX_MESSAGE_LINES:
        lines.append(f"{indent}… {len(parts) - MAX_MESSAGE_LINES} more lines")
    return lines


def field_lines(field: Field, indent: str = "  ") -> list[str]:
    """One line for ``field`` (name, type, required, bounds, default), then its options."""
    about = [_KIND_NAMES[field.kind], "required" if field.required else "optional"]
    about += _bounds(field)
    head = f"{indent}- {printable(field.name, 60)} ({', '.join(about)})"
    title = field.title if field.title != field.name else None
    text = " — ".join(printable(t, 120) for t in (title, field.description) if t)
    if text:
        head += f": {text}"
    if field.default is not None:
        head += f" [default: {printable(to_text(field, field.default), 60)}]"
    lines = [head]
    for option in field.options[:MAX_OPTIONS]:
        value, title = printable(option.value, 60), printable(option.title, 80)
        lines.append(f"{indent}    {value}" + (f" — {title}" if title != value else ""))
    if len(field.options) > MAX_OPTIONS:
        lines.append(f"{indent}    … and {len(field.options) - MAX_OPTIONS} more")
    return lines


def _bounds(field: Field) -> list[str]:
    out = []
    if field.minimum is not None or field.maximum is not None:
        low = "" if field.minimum is None else _num(field.minimum)
        high = "" if field.maximum is None else _num(field.maximum)
        out.append(f"{low}..{high}")
    if field.min_length is not None or field.max_length is not None:
        out.append(f"{field.min_length or 0}..{field.max_length or ''} characters")
    if field.min_items is not None or field.max_items is not None:
        out.append(f"choose {field.min_items or 0}..{field.max_items or ''}")
    return out


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def prompt_answer(request: InputRequest, ask: Ask, say: Say) -> dict[str, Any]:
    """Ask for ``request``'s fields one by one; return the answer's ``content``.

    A value that does not fit its field is explained and asked again; the answer returned
    always passes ``validate_answer``.

    Raises:
        UsageError: the request cannot be answered with a form here (a URL, sampling or
            roots request, or a required field chit cannot build): the message says how.
    """
    for line in request_lines(request, indent=""):
        say(line)
    if not _is_form(request) or request.url:
        raise UsageError(
            "this request is not a form: answer it with chit answer RECEIPT --json '{…}'"
            " (or --decline / --cancel)"
        )
    schema = request.requested_schema or {}
    form = form_from_schema(schema)
    _refuse_unanswerable(form)
    while True:
        answer: dict[str, Any] = {}
        for field in form.fields:
            value = _ask_field(field, ask, say)
            if value is not None:
                answer[field.name] = value
        # Beyond the schema: a roots answer shares only file:// URIs (asked again).
        extra = answer_problems(request.kind, answer)
        if not extra:
            break
        say(f"{printable(extra[0], 200)} — try again")
    problems = validate_answer(schema, answer)
    if problems:  # only what no field could ask for: say it, and how to answer instead
        raise UsageError(
            "the answer cannot be completed here: "
            + "; ".join(problems[:3])
            + " — answer with chit answer RECEIPT --json '{…}'"
        )
    return answer


def _refuse_unanswerable(form: Form) -> None:
    missing = [note for note in form.unsupported if note.endswith("(required)")]
    if missing:
        raise UsageError(
            f"this form needs a field chit cannot ask for ({printable(missing[0], 120)}):"
            " answer with chit answer RECEIPT --json '{…}'"
        )


def _ask_field(field: Field, ask: Ask, say: Say) -> Any:
    label = printable(field.title, 80)
    if field.options and field.kind == "multi_enum":
        label += " (comma-separated)"
    default = to_text(field, field.default) if field.default is not None else None
    while True:
        typed = ask(label, default)
        try:
            value = coerce(field, typed)
        except FormInputError as exc:
            say(f"{printable(str(exc))} — try again")
            continue
        if value is None and field.default is not None:
            return field.default if not isinstance(field.default, tuple) else list(field.default)
        return value


# --- on a real terminal ---------------------------------------------------------------


def terminal_ask(label: str, default: str | None) -> str:
    """``click.prompt`` on stderr; Ctrl-C / end of input become ``KeyboardInterrupt``."""
    import click

    try:
        typed: str = click.prompt(
            label, default=default or "", show_default=bool(default), err=True
        )
    except click.exceptions.Abort:
        raise KeyboardInterrupt from None  # the command detaches, as Ctrl-C elsewhere
    return typed


def terminal_say(line: str) -> None:
    """One line on stderr."""
    import click

    click.echo(line, err=True)


class Abandoned(Exception):
    """The prompt was given up: the request was answered elsewhere (or ended)."""


def abandonable_ask(abandoned: threading.Event) -> Ask:
    """A terminal ``ask`` that gives up (raises :class:`Abandoned`) once ``abandoned`` is set.

    A blocking ``input()`` cannot be interrupted from another thread, so stdin is read
    only once ``select`` says a whole line is there, looking at ``abandoned`` in between.
    Without it a ``--wait`` prompt kept waiting for the person after another terminal
    (``chit answer``, the TUI) had answered and the task had completed.
    """

    def ask(label: str, default: str | None) -> str:
        import select
        import sys

        import click

        click.echo(f"{label} [{default}]: " if default else f"{label}: ", nl=False, err=True)
        while not abandoned.is_set():
            ready, _, _ = select.select([sys.stdin], [], [], 0.2)
            if not ready:
                continue
            line = sys.stdin.readline()
            if not line:  # end of input, as Ctrl-D at click's prompt
                raise KeyboardInterrupt
            typed = line.rstrip("\r\n")
            return typed if typed or not default else default
        click.echo("", err=True)
        raise Abandoned

    return ask


async def ask_on_terminal(
    request: InputRequest, abandoned: threading.Event | None = None
) -> dict[str, Any]:
    """:func:`prompt_answer` on the terminal, off the event loop.

    The prompt blocks on the person; the engine (the lease heartbeat, a 2025 watcher
    holding the prompt open) must keep running meanwhile, so the questions are asked in
    a daemon thread — one Ctrl-C abandons it without keeping the process alive.

    Raises:
        Abandoned: ``abandoned`` was set while the prompt waited for the person.
    """
    import contextlib

    import anyio
    import anyio.from_thread
    import anyio.lowlevel

    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    outcome: dict[str, Any] = {}
    ask = terminal_ask if abandoned is None else abandonable_ask(abandoned)

    def run() -> None:
        try:
            outcome["value"] = prompt_answer(request, ask, terminal_say)
        except BaseException as exc:
            outcome["error"] = exc
        # RuntimeError: the loop is gone (the command ended) — nobody waits any more.
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=run, name="chit prompt", daemon=True).start()
    await done.wait()
    if "error" in outcome:
        raise outcome["error"]
    value: dict[str, Any] = outcome["value"]
    return value
