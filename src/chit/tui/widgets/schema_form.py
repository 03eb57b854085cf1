"""A form generated from a JSON schema: one labelled widget per field, errors under each."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, Select, SelectionList, Static

from chit.tui.forms import Field, collect


def _label(field: Field) -> Text:
    text = Text(field.title, style="bold")
    if field.required:
        text.append(" *", style="bold red")
    if field.hint:
        text.append(f"  ({field.hint})", style="dim")
    if field.description and field.description != field.title:
        text.append(f"\n{field.description}", style="italic")
    return text


def _initial(field: Field) -> str:
    if field.default is None:
        return ""
    return json.dumps(field.default) if field.kind == "json" else str(field.default)


class SchemaForm(Vertical):
    """The fields of one schema; :meth:`collect` validates and returns the content."""

    DEFAULT_CSS = """
    SchemaForm { height: auto; }
    SchemaForm > Label { margin-top: 1; }
    SchemaForm > .field-error { color: $error; height: auto; }
    SchemaForm > .field-error.-empty { display: none; }
    SchemaForm SelectionList { height: auto; max-height: 8; }
    """

    def __init__(self, fields: tuple[Field, ...], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.fields = fields

    def compose(self) -> ComposeResult:
        for i, field in enumerate(self.fields):
            if field.kind != "boolean":
                yield Label(_label(field))
            yield self._widget(i, field)
            yield Static("", id=f"error-{i}", classes="field-error -empty")

    def _widget(self, i: int, field: Field) -> Widget:
        wid = f"field-{i}"
        if field.kind == "boolean":
            return Checkbox(_label(field), value=bool(field.default), id=wid)
        if field.kind == "enum":
            options = [(title, value) for value, title in field.options]
            values = [value for value, _ in field.options]
            default = field.default if field.default in values else Select.NULL
            return Select(options, value=default, allow_blank=True, id=wid, prompt="choose…")
        if field.kind == "multi":
            chosen = set(field.default or ())
            items = [(title, value, value in chosen) for value, title in field.options]
            return SelectionList[Any](*items, id=wid)
        placeholder = field.fmt or field.kind
        return Input(_initial(field), placeholder=placeholder, id=wid)

    def raw(self) -> dict[str, Any]:
        """What each widget holds, by field name (before coercion)."""
        values: dict[str, Any] = {}
        for i, field in enumerate(self.fields):
            widget = self.query_one(f"#field-{i}")
            if isinstance(widget, Checkbox):
                values[field.name] = widget.value
            elif isinstance(widget, Select):
                values[field.name] = None if widget.value is Select.NULL else widget.value
            elif isinstance(widget, SelectionList):
                values[field.name] = list(widget.selected)
            elif isinstance(widget, Input):
                values[field.name] = widget.value
        return values

    def collect(self) -> tuple[dict[str, Any], dict[str, str]]:
        """Validate every field, show the messages, return content and errors."""
        content, errors = collect(self.fields, self.raw())
        for i, field in enumerate(self.fields):
            box = self.query_one(f"#error-{i}", Static)
            message = errors.get(field.name, "")
            box.update(f"↳ {message}" if message else "")
            box.set_class(not message, "-empty")
        return content, errors

    def focus_first(self) -> None:
        """Focus the first field."""
        if self.fields:
            self.query_one("#field-0").focus()
