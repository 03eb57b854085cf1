"""Forms from MCP elicitation schemas, for the TUI's widgets and the CLI's prompts.

A form-mode elicitation (MCP 2025-11-25) carries a ``requestedSchema``: a flat object whose
properties are primitives — string (``minLength``, ``maxLength``, ``format`` email / uri /
date / date-time), number / integer (``minimum``, ``maximum``), boolean, single-select enums
(``enum`` + optional ``enumNames``, or ``oneOf`` of ``{const, title}``) and multi-select
arrays (``items.enum`` or ``items.anyOf`` of ``{const, title}``, ``minItems`` /
``maxItems``), each with an optional ``default``, plus a ``required`` list.
:func:`form_from_schema` turns that into :class:`Form`; whatever it cannot represent is
named in ``Form.unsupported`` instead of being dropped silently. :func:`coerce` turns one
text input into a value, :func:`field_problems` checks one value (``chit.receipts.answers``
checks a whole answer). URL-mode elicitations carry no schema: see ``answers.url_request``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Final, Literal

__all__ = [
    "Field",
    "FieldKind",
    "Form",
    "FormInputError",
    "Option",
    "coerce",
    "field_problems",
    "form_from_schema",
    "to_text",
]

FieldKind = Literal[
    "string", "email", "uri", "date", "datetime", "number", "integer", "boolean", "enum",
    "multi_enum",
]  # fmt: skip
TEXT_KINDS: Final = frozenset({"string", "email", "uri", "date", "datetime"})
_FORMATS: Final[dict[str, FieldKind]] = {
    "email": "email", "uri": "uri", "date": "date", "date-time": "datetime",
}  # fmt: skip
_TRUE: Final = frozenset({"true", "yes", "y", "1", "on"})
_FALSE: Final = frozenset({"false", "no", "n", "0", "off"})
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATETIME = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2})(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_TEXT_MAX: Final = 10_000  # longest raw input coerce() looks at


class FormInputError(ValueError):
    """A text input that does not fit its field; ``str()`` names the field."""


@dataclass(frozen=True, slots=True)
class Option:
    """One choice of an enum field: the value sent and the title shown."""

    value: str
    title: str


@dataclass(frozen=True, slots=True)
class Field:
    """One form field. ``default`` is None when the schema gives none (or an invalid one)."""

    name: str
    title: str
    description: str | None
    kind: FieldKind
    required: bool = False
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    options: tuple[Option, ...] = ()
    min_items: int | None = None
    max_items: int | None = None

    def option_values(self) -> tuple[str, ...]:
        """The values of ``options``, in order."""
        return tuple(o.value for o in self.options)


@dataclass(frozen=True, slots=True)
class Form:
    """A form: its fields in schema order, and readable notes on what was not representable."""

    fields: tuple[Field, ...]
    unsupported: tuple[str, ...] = ()

    def field(self, name: str) -> Field | None:
        """Return the field called ``name``, or None."""
        return next((f for f in self.fields if f.name == name), None)


class _Unsupported(Exception):
    pass


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _num(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return value if ok and math.isfinite(value) else None


def _options(spec: Any) -> tuple[Option, ...]:
    if not isinstance(spec, Mapping):
        raise _Unsupported("its items are not a schema object")
    if "enum" in spec:
        values, names = spec["enum"], spec.get("enumNames")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise _Unsupported("enum values must be strings")
        titles: list[Any] = values
        if isinstance(names, list) and len(names) == len(values):
            titles = names if all(isinstance(n, str) for n in names) else values
        options = tuple(Option(v, t) for v, t in zip(values, titles, strict=True))
    else:
        choices = spec.get("oneOf", spec.get("anyOf"))
        if not isinstance(choices, list):
            raise _Unsupported("it has no enum, oneOf or anyOf of choices")
        if not all(isinstance(c, Mapping) and isinstance(c.get("const"), str) for c in choices):
            raise _Unsupported("every choice must be {const: string, title?: string}")
        options = tuple(
            Option(c["const"], c["title"] if isinstance(c.get("title"), str) else c["const"])
            for c in choices
        )
    if not options or len({o.value for o in options}) != len(options):
        raise _Unsupported("its choices are empty or repeated")
    return options


def _field(name: str, prop: Any, required: bool, notes: list[str]) -> Field:
    if not isinstance(prop, Mapping):
        raise _Unsupported("not a schema object")
    kind: FieldKind
    options: tuple[Option, ...] = ()
    typ = prop.get("type")
    if typ == "array":
        kind, options = "multi_enum", _options(prop.get("items"))
    elif typ in (None, "string") and ("enum" in prop or "oneOf" in prop):
        kind, options = "enum", _options(prop)
    elif typ == "string":
        fmt = prop.get("format")
        kind = _FORMATS.get(fmt, "string") if isinstance(fmt, str) else "string"
        if fmt is not None and fmt not in _FORMATS:
            notes.append(f"{name}: format {fmt!r} is not a form format; treated as text")
    elif typ in ("number", "integer", "boolean"):
        kind = typ
    else:
        raise _Unsupported(f"type {typ!r} is not a form primitive")
    title, description = prop.get("title"), prop.get("description")
    numeric, multi = kind in ("number", "integer"), kind == "multi_enum"
    field = Field(
        name=name,
        title=title if isinstance(title, str) and title else name,
        description=description if isinstance(description, str) else None,
        kind=kind,
        required=required,
        minimum=_num(prop.get("minimum")) if numeric else None,
        maximum=_num(prop.get("maximum")) if numeric else None,
        min_length=_int(prop.get("minLength")) if kind in TEXT_KINDS else None,
        max_length=_int(prop.get("maxLength")) if kind in TEXT_KINDS else None,
        options=options,
        min_items=_int(prop.get("minItems")) if multi else None,
        max_items=_int(prop.get("maxItems")) if multi else None,
    )
    if "default" in prop:
        default = prop["default"]
        problems = field_problems(field, default)
        if problems:
            notes.append(f"{name}: default {default!r} ignored ({problems[0]})")
        else:
            default = tuple(default) if multi else default
            field = Field(**{**_as_dict(field), "default": default})
    return field


def _as_dict(field: Field) -> dict[str, Any]:
    return {slot: getattr(field, slot) for slot in Field.__slots__}


def form_from_schema(schema: Any) -> Form:
    """Describe an elicitation ``requestedSchema`` as a form.

    Args:
        schema: the ``requestedSchema`` (any value; a bad one gives an empty form).

    Returns:
        The form: supported fields in schema order, and one note per property (or
        schema-level problem) it could not represent, marked "(required)" when the
        form cannot be answered validly without it.
    """
    if not isinstance(schema, Mapping):
        return Form((), ("the schema is not an object",))
    notes: list[str] = []
    if schema.get("type", "object") != "object":
        notes.append(f"the schema's type is {schema.get('type')!r}, not 'object'")
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        notes.append("the schema's properties are not an object")
        props = {}
    listed = schema.get("required", [])
    required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
    fields: list[Field] = []
    for name, prop in props.items():
        try:
            fields.append(_field(str(name), prop, name in required, notes))
        except _Unsupported as exc:
            notes.append(f"{name}: {exc}" + (" (required)" if name in required else ""))
    notes += [f"{n}: required but not described (required)" for n in sorted(required - set(props))]
    return Form(tuple(fields), tuple(notes))


def show(value: Any) -> str:
    """``repr(value)`` cut to 40 characters, for messages."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _text_problem(kind: str, value: str) -> str | None:
    if kind == "email":
        local, at, domain = value.partition("@")
        labels = domain.split(".")
        good = all(label and label[0] != "-" and label[-1] != "-" for label in labels) and all(
            c.isalnum() or c == "-" for c in domain.replace(".", "")
        )
        ok = (
            bool(at and local and good and not any(c.isspace() for c in local))
            and "@" not in domain
        )
        return None if ok else "not a valid email address"
    if kind == "uri":
        ok = _SCHEME.match(value) is not None and value.isprintable() and " " not in value
        return None if ok and len(value) > value.index(":") + 1 else "not an absolute URI"
    if kind == "date":
        try:
            ok = _DATE.fullmatch(value) is not None and bool(date.fromisoformat(value))
        except ValueError:
            ok = False
        return None if ok else "not a date like 2026-01-31"
    if kind == "datetime":
        m = _DATETIME.fullmatch(value)
        try:
            zone = "+00:00" if m and m.group(3) in "Zz" else m.group(3) if m else ""
            ok = m is not None and bool(
                datetime.fromisoformat(m.group(1).upper() + (m.group(2) or "")[:7] + zone)
            )
        except ValueError:
            ok = False
        return None if ok else "not a date-time like 2026-01-31T09:30:00Z"
    return None


def field_problems(field: Field, value: Any) -> list[str]:
    """Every problem with ``value`` as the answer to ``field`` (empty when valid).

    Args:
        field: the field.
        value: the JSON value (str, int, float, bool or a list of str).

    Returns:
        Readable problems, without the field's name (callers add it).
    """
    kind, out = field.kind, []
    if kind in TEXT_KINDS:
        if not isinstance(value, str):
            return [f"expected text, got {show(value)}"]
        if field.min_length is not None and len(value) < field.min_length:
            out.append(f"must be at least {field.min_length} characters")
        if field.max_length is not None and len(value) > field.max_length:
            out.append(f"must be at most {field.max_length} characters")
        problem = _text_problem(kind, value)
        out += [problem] if problem else []
    elif kind in ("number", "integer"):
        if _num(value) is None:
            return [f"expected a number, got {show(value)}"]
        if kind == "integer" and not float(value).is_integer():
            return [f"expected a whole number, got {show(value)}"]
        if field.minimum is not None and value < field.minimum:
            out.append(f"must be at least {_bound(field.minimum)}")
        if field.maximum is not None and value > field.maximum:
            out.append(f"must be at most {_bound(field.maximum)}")
    elif kind == "boolean":
        out += [] if isinstance(value, bool) else [f"expected true or false, got {show(value)}"]
    elif kind == "enum":
        if value not in field.option_values() or not isinstance(value, str):
            out.append(f"{show(value)} is not one of the options: {_choices(field)}")
    else:  # multi_enum
        if not isinstance(value, list | tuple):
            return [f"expected a list of choices, got {show(value)}"]
        bad = [v for v in value if not isinstance(v, str) or v not in field.option_values()]
        out += [f"{show(v)} is not one of the options: {_choices(field)}" for v in bad[:3]]
        if len(set(map(repr, value))) != len(value):
            out.append("a choice is selected more than once")
        if field.min_items is not None and len(value) < field.min_items:
            out.append(f"select at least {field.min_items} (got {len(value)})")
        if field.max_items is not None and len(value) > field.max_items:
            out.append(f"select at most {field.max_items} (got {len(value)})")
    return out


def _choices(field: Field) -> str:
    shown = ", ".join(o.value for o in field.options[:10])
    return shown + (", …" if len(field.options) > 10 else "")


def _resolve(field: Field, token: str) -> str:
    for attr in ("value", "title"):
        hit = [o.value for o in field.options if getattr(o, attr) == token]
        if hit:
            return hit[0]
    folded = {
        o.value
        for o in field.options
        if token.casefold() in (o.value.casefold(), o.title.casefold())
    }
    if len(folded) == 1:
        return folded.pop()
    raise FormInputError(f"{field.title}: {token!r} is not one of the options: {_choices(field)}")


def coerce(field: Field, raw_text: str) -> Any:
    """Turn one text input into the field's JSON value, or explain why it cannot.

    Empty (or blank) input means "no answer": None for an optional field, an error for a
    required one (a required multi-select reads it as an empty selection). Booleans take
    yes/no, true/false, y/n, 1/0, on/off; enums take an option's value or title
    (case-insensitive when unambiguous); multi-selects take them separated by commas.

    Args:
        field: the field.
        raw_text: what the user typed.

    Returns:
        The value (str, int, float, bool or list of str), or None for "no answer".

    Raises:
        FormInputError: naming the field's title and what was expected.
    """
    text = raw_text.strip()
    if not text:
        if field.required and field.kind == "multi_enum":
            text = ","  # an explicit empty selection; min_items decides
        elif field.required:
            raise FormInputError(f"{field.title}: an answer is required")
        else:
            return None
    if len(raw_text) > _TEXT_MAX:
        raise FormInputError(f"{field.title}: at most {_TEXT_MAX} characters, please")
    value: Any = raw_text if field.kind == "string" else text
    if field.kind in ("number", "integer"):
        pattern = _INTEGER if field.kind == "integer" else _NUMBER
        try:
            if not pattern.fullmatch(text):
                raise ValueError(text)
            value = int(text) if _INTEGER.fullmatch(text) else float(text)
        except ValueError:
            kind = "a whole number" if field.kind == "integer" else "a number"
            raise FormInputError(f"{field.title}: expected {kind}, got {show(text)}") from None
    elif field.kind == "boolean":
        if text.casefold() not in _TRUE | _FALSE:
            raise FormInputError(f"{field.title}: expected yes or no, got {show(text)}")
        value = text.casefold() in _TRUE
    elif field.kind == "enum":
        value = _resolve(field, text)
    elif field.kind == "multi_enum":
        value = list(
            dict.fromkeys(_resolve(field, t.strip()) for t in text.split(",") if t.strip())
        )
    problems = field_problems(field, value)
    if problems:
        raise FormInputError(f"{field.title}: {problems[0]}")
    return value


def to_text(field: Field, value: Any) -> str:
    """Render a value (e.g. a default) as the text :func:`coerce` reads back to it."""
    if value is None:
        return ""
    if field.kind == "boolean":
        return "yes" if value else "no"
    if field.kind == "multi_enum":
        return ", ".join(str(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)
