"""Form fields from a JSON schema (MCP elicitation ``requestedSchema`` or a tool's input).

Plain data and validation, no Textual: :mod:`chit.tui.widgets.schema_form` renders the
fields. MCP restricts elicitation schemas to a flat object of primitives (strings with
formats, numbers/integers with bounds, booleans, single- and multi-select enums), which
is exactly what is handled here; anything else becomes a JSON text field so a tool's
richer input schema can still be filled in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

Kind = Literal["text", "number", "integer", "boolean", "enum", "multi", "json"]

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")


@dataclass(frozen=True)
class Field:
    """One form field, derived from one schema property."""

    name: str
    kind: Kind
    title: str
    description: str | None = None
    required: bool = False
    default: Any = None
    options: tuple[tuple[Any, str], ...] = ()
    fmt: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None

    @property
    def hint(self) -> str:
        """A one-line hint: format, bounds and length limits."""
        parts: list[str] = []
        if self.fmt:
            parts.append(self.fmt)
        if self.minimum is not None or self.maximum is not None:
            low = "" if self.minimum is None else f"{self.minimum:g}"
            high = "" if self.maximum is None else f"{self.maximum:g}"
            parts.append(f"{low}…{high}")
        if self.min_length is not None or self.max_length is not None:
            parts.append(f"length {self.min_length or 0}…{self.max_length or ''}")
        if self.kind == "json":
            parts.append("JSON")
        return ", ".join(parts)


def _options(spec: dict[str, Any]) -> tuple[tuple[Any, str], ...]:
    if isinstance(spec.get("oneOf"), list) or isinstance(spec.get("anyOf"), list):
        choices = spec.get("oneOf") or spec.get("anyOf") or []
        return tuple(
            (c["const"], str(c.get("title", c["const"])))
            for c in choices
            if isinstance(c, dict) and "const" in c
        )
    values = spec.get("enum") or []
    names = spec.get("enumNames") or []
    return tuple((v, str(names[i]) if i < len(names) else str(v)) for i, v in enumerate(values))


def _field(name: str, spec: dict[str, Any], required: bool) -> Field:
    kind_of = spec.get("type")
    common: dict[str, Any] = {
        "name": name,
        "title": str(spec.get("title") or name),
        "description": spec.get("description"),
        "required": required,
        "default": spec.get("default"),
    }
    options = _options(spec)
    if kind_of == "array":
        items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
        item_options = _options(items or {})
        if item_options:
            return Field(
                kind="multi",
                options=item_options,
                min_items=spec.get("minItems"),
                max_items=spec.get("maxItems"),
                **common,
            )
        return Field(kind="json", **common)
    if options:
        return Field(kind="enum", options=options, **common)
    if kind_of == "boolean":
        return Field(kind="boolean", **common)
    if kind_of in ("number", "integer"):
        return Field(
            kind=kind_of,
            minimum=spec.get("minimum"),
            maximum=spec.get("maximum"),
            **common,
        )
    if kind_of == "string":
        return Field(
            kind="text",
            fmt=spec.get("format"),
            min_length=spec.get("minLength"),
            max_length=spec.get("maxLength"),
            pattern=spec.get("pattern"),
            **common,
        )
    return Field(kind="json", **common)


def fields_from_schema(schema: dict[str, Any] | None) -> tuple[Field, ...]:
    """Return the fields of an object schema, in property order (none for no schema)."""
    if not schema or not isinstance(schema.get("properties"), dict):
        return ()
    required = set(schema.get("required") or ())
    return tuple(
        _field(name, spec if isinstance(spec, dict) else {}, name in required)
        for name, spec in schema["properties"].items()
    )


def _check_format(fmt: str | None, text: str) -> None:
    if fmt == "email" and not _EMAIL.match(text):
        raise ValueError("not an e-mail address")
    if fmt in ("uri", "url") and not _URI.match(text):
        raise ValueError("not a URI (e.g. https://example.com)")
    if fmt == "date":
        try:
            date.fromisoformat(text)
        except ValueError:
            raise ValueError("not a date (YYYY-MM-DD)") from None
    if fmt == "date-time":
        try:
            datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("not a date-time (YYYY-MM-DDTHH:MM:SSZ)") from None


def _number(field: Field, raw: str) -> float | int:
    try:
        value: float | int = int(raw) if field.kind == "integer" else float(raw)
    except ValueError:
        raise ValueError(f"not {'an integer' if field.kind == 'integer' else 'a number'}") from None
    if field.minimum is not None and value < field.minimum:
        raise ValueError(f"must be at least {field.minimum:g}")
    if field.maximum is not None and value > field.maximum:
        raise ValueError(f"must be at most {field.maximum:g}")
    return value


def _text(field: Field, raw: str) -> str:
    if field.min_length is not None and len(raw) < field.min_length:
        raise ValueError(f"must be at least {field.min_length} characters")
    if field.max_length is not None and len(raw) > field.max_length:
        raise ValueError(f"must be at most {field.max_length} characters")
    if field.pattern and not re.search(field.pattern, raw):
        raise ValueError(f"must match {field.pattern}")
    _check_format(field.fmt, raw)
    return raw


def _multi(field: Field, raw: list[Any]) -> list[Any]:
    if field.min_items is not None and len(raw) < field.min_items:
        raise ValueError(f"choose at least {field.min_items}")
    if field.max_items is not None and len(raw) > field.max_items:
        raise ValueError(f"choose at most {field.max_items}")
    return raw


def coerce(field: Field, raw: Any) -> Any:
    """Turn what the widget holds into the JSON value; ``None`` means "not given".

    Raises:
        ValueError: the value breaks the field's type, bounds or format (message shown
            under the field).
    """
    if field.kind == "boolean":
        return bool(raw)
    if field.kind == "multi":
        value = list(raw or [])
        if not value:
            if field.required:
                raise ValueError("choose at least one")
            return None
        return _multi(field, value)
    if field.kind == "enum":
        if raw is None:
            if field.required:
                raise ValueError("required: choose one")
            return None
        return raw
    text = "" if raw is None else str(raw).strip()
    if not text:
        if field.required:
            raise ValueError("required")
        return None
    if field.kind in ("number", "integer"):
        return _number(field, text)
    if field.kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc.msg}") from None
    return _text(field, text)


def collect(
    fields: tuple[Field, ...], raw: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Coerce every field; return the content and the error message per field name."""
    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in fields:
        try:
            value = coerce(field, raw.get(field.name))
        except ValueError as exc:
            errors[field.name] = str(exc)
            continue
        if value is not None:
            content[field.name] = value
    return content, errors


def validate_content(schema: dict[str, Any] | None, content: dict[str, Any]) -> list[str]:
    """The core's own check (the Supervisor refuses what it rejects): a list of problems."""
    from chit.reconcile import validate_answer

    return list(validate_answer(schema, content))
