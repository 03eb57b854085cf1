"""Widgets for a :class:`chit.receipts.forms.Form`: one labelled widget per field.

The rules live in ``chit.receipts.forms`` (shared with ``chit answer`` and the
reconciler): this module only maps each field kind to a widget, turns what the widget
holds into the text :func:`~chit.receipts.forms.coerce` reads, and shows its messages
under the field. Nothing here reads a JSON schema.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, Select, SelectionList, Static

from chit.errors import UsageError
from chit.inputs import parse_json
from chit.receipts.forms import Field, Form, FormInputError, coerce, to_text
from chit.tui.safe import clean, one_line, plain

EXTRA = "extra"
"""The error key of the raw-JSON box (new call only) for what the form cannot show."""

_PLACEHOLDERS = {
    "email": "name@example.com",
    "uri": "https://…",
    "date": "2026-01-31",
    "datetime": "2026-01-31T09:30:00Z",
    "number": "number",
    "integer": "whole number",
    "string": "text",
}


def _bound(value: float) -> str:
    return f"{value:g}"


def hint(field: Field) -> str:
    """A one-line hint for the label: format, bounds, length and selection limits."""
    parts: list[str] = []
    if field.kind in ("email", "uri", "date"):
        parts.append(field.kind)
    elif field.kind == "datetime":
        parts.append("date-time")
    if field.minimum is not None or field.maximum is not None:
        low = "" if field.minimum is None else _bound(field.minimum)
        high = "" if field.maximum is None else _bound(field.maximum)
        parts.append(f"{low}…{high}")
    if field.min_length is not None or field.max_length is not None:
        parts.append(f"length {field.min_length or 0}…{field.max_length or ''}")
    if field.min_items is not None or field.max_items is not None:
        parts.append(f"choose {field.min_items or 0}…{field.max_items or ''}")
    return ", ".join(parts)


def _label(field: Field) -> Text:
    # Titles and descriptions come from the server: Text, never markup.
    text = plain(one_line(field.title), "bold")
    if field.required:
        text.append(" *", style="bold")
    if hint(field):
        text.append(f"  ({one_line(hint(field))})")
    if field.description and field.description != field.title:
        text.append("\n" + clean(field.description), style="italic")
    return text


def _message(field: Field, error: FormInputError) -> str:
    # coerce() names the field ("Copies: must be at most 5"); under the field that is noise.
    text = str(error)
    prefix = f"{field.title}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


class SchemaForm(Vertical):
    """The fields of one form; :meth:`collect` coerces every field and shows the messages.

    Args:
        form: the form (``chit.receipts.forms.form_from_schema``).
        extra: offer a raw-JSON box for what the form cannot represent (a tool's input
            may be richer than an elicitation form; the server checks that part).
        id: the widget id.
    """

    DEFAULT_CSS = """
    SchemaForm { height: auto; }
    SchemaForm > Label { margin-top: 1; }
    SchemaForm > .field-error { color: $text-error; text-style: bold; height: auto; }
    SchemaForm > .field-error.-empty { display: none; }
    SchemaForm > #unsupported { color: $warning; height: auto; margin-top: 1; }
    SchemaForm SelectionList { height: auto; max-height: 8; }
    """

    def __init__(self, form: Form, *, extra: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.form = form
        self.extra = extra and bool(form.unsupported)

    @property
    def fields(self) -> tuple[Field, ...]:
        """The form's fields, in schema order."""
        return self.form.fields

    def compose(self) -> ComposeResult:
        for i, field in enumerate(self.fields):
            if field.kind != "boolean":
                yield Label(_label(field))
            yield self._widget(i, field)
            yield Static("", id=f"error-{i}", classes="field-error -empty")
        if self.form.unsupported:
            notes = "\n".join(f"• {one_line(note)}" for note in self.form.unsupported)
            yield Static(plain(f"chit cannot build a field for:\n{notes}"), id="unsupported")
        if self.extra:
            yield Label(Text("Other arguments (a JSON object)", style="bold"))
            yield Input(placeholder='{"key": "value"}', id="field-extra")
            yield Static("", id="error-extra", classes="field-error -empty")

    def _widget(self, i: int, field: Field) -> Widget:
        wid = f"field-{i}"
        if field.kind == "boolean":
            return Checkbox(_label(field), value=bool(field.default), id=wid)
        if field.kind == "enum":
            options = [(plain(one_line(o.title)), o.value) for o in field.options]
            default = field.default if field.default is not None else Select.NULL
            return Select(options, value=default, allow_blank=True, id=wid, prompt="choose…")
        if field.kind == "multi_enum":
            chosen = set(field.default or ())
            items = [(plain(one_line(o.title)), o.value, o.value in chosen) for o in field.options]
            return SelectionList[str](*items, id=wid)
        placeholder = _PLACEHOLDERS.get(field.kind, "")
        return Input(to_text(field, field.default), placeholder=placeholder, id=wid)

    def raw(self) -> dict[str, str]:
        """What each widget holds, as the text ``coerce`` reads, by field name."""
        values: dict[str, str] = {}
        for i, field in enumerate(self.fields):
            widget = self.query_one(f"#field-{i}")
            if isinstance(widget, Checkbox):
                values[field.name] = to_text(field, widget.value)
            elif isinstance(widget, Select):
                values[field.name] = "" if widget.value is Select.NULL else str(widget.value)
            elif isinstance(widget, SelectionList):
                values[field.name] = to_text(field, list(widget.selected))
            elif isinstance(widget, Input):
                values[field.name] = widget.value
        return values

    def _extra(self) -> dict[str, Any]:
        text = self.query_one("#field-extra", Input).value.strip()
        if not text:
            return {}
        try:
            # Standard JSON only, bounded depth, valid text: what a server can be sent.
            value = parse_json(text, "extra fields")
        except UsageError as exc:
            raise ValueError(exc.message) from None
        if not isinstance(value, dict):
            raise ValueError("must be a JSON object")
        return value

    def collect(self) -> tuple[dict[str, Any], dict[str, str]]:
        """Coerce every field, show the messages; return the content and errors by name."""
        content: dict[str, Any] = {}
        errors: dict[str, str] = {}
        if self.extra:
            try:
                content.update(self._extra())
            except ValueError as exc:
                errors[EXTRA] = str(exc)
        raw = self.raw()
        for field in self.fields:
            try:
                value = coerce(field, raw[field.name])
            except FormInputError as exc:
                errors[field.name] = _message(field, exc)
                continue
            if value is not None:
                content[field.name] = value
        boxes = [(f"#error-{i}", f.name) for i, f in enumerate(self.fields)]
        boxes += [("#error-extra", EXTRA)] if self.extra else []
        for selector, name in boxes:
            box = self.query_one(selector, Static)
            message = errors.get(name, "")
            box.update(plain(f"↳ {message}") if message else "")
            box.set_class(not message, "-empty")
        return content, errors

    def show_first_error(self) -> None:
        """Scroll the first field with a problem into view and focus it."""
        for i, _field in enumerate(self.fields):
            box = self.query_one(f"#error-{i}", Static)
            if not box.has_class("-empty"):
                self.query_one(f"#field-{i}").focus()
                box.scroll_visible(animate=False)
                return
        if self.extra and not self.query_one("#error-extra").has_class("-empty"):
            self.query_one("#field-extra").focus()

    def focus_first(self) -> None:
        """Focus the first field (once it exists).

        A screen's ``on_mount`` can run before this form's own children are composed
        (seen with a long sampling question on a loaded machine: ``#field-0`` not found,
        the dialog crashed and the screen went blank), so an absent field is focused
        after the next refresh instead of being looked up blindly.
        """
        if not self.fields:
            return
        found = self.query("#field-0")
        if found:
            found.first().focus()
        elif self.is_attached:
            self.call_after_refresh(self.focus_first)
