"""Forms from elicitation schemas: every construct, coercion of text input, URL mode.

The hypothesis strategies at the bottom (random form schemas with valid answers) are
shared with ``test_receipts_answers``.
"""

from __future__ import annotations

import string
from datetime import UTC
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chit.receipts.answers import url_request
from chit.receipts.forms import (
    Field,
    FormInputError,
    Option,
    coerce,
    field_problems,
    form_from_schema,
    to_text,
)


def one(prop: dict[str, Any], required: bool = False) -> Field:
    schema = {"type": "object", "properties": {"f": prop}, "required": ["f"] if required else []}
    form = form_from_schema(schema)
    assert form.unsupported == (), form.unsupported
    assert len(form.fields) == 1
    return form.fields[0]


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ({"type": "string"}, {"kind": "string"}),
        ({"type": "string", "minLength": 2, "maxLength": 9}, {"min_length": 2, "max_length": 9}),
        ({"type": "string", "format": "email"}, {"kind": "email"}),
        ({"type": "string", "format": "uri"}, {"kind": "uri"}),
        ({"type": "string", "format": "date"}, {"kind": "date"}),
        ({"type": "string", "format": "date-time"}, {"kind": "datetime"}),
        ({"type": "number", "minimum": 0.5, "maximum": 9}, {"kind": "number", "minimum": 0.5}),
        ({"type": "integer", "minimum": 1, "maximum": 3}, {"kind": "integer", "maximum": 3}),
        ({"type": "boolean", "default": False}, {"kind": "boolean", "default": False}),
        ({"type": "string", "title": "T", "description": "D"}, {"title": "T", "description": "D"}),
        ({"type": "string", "title": ""}, {"title": "f"}),
        ({"type": "string", "default": "hi"}, {"default": "hi"}),
        (
            {"type": "integer", "minLength": 3, "minimum": True},
            {"min_length": None, "minimum": None},
        ),
        (
            {"type": "string", "enum": ["a", "b"]},
            {"kind": "enum", "options": (Option("a", "a"), Option("b", "b"))},
        ),
        (
            {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"], "default": "b"},
            {"options": (Option("a", "A"), Option("b", "B")), "default": "b"},
        ),
        ({"enum": ["a"], "enumNames": ["A", "extra"]}, {"options": (Option("a", "a"),)}),
        (
            {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l"}]},
            {"kind": "enum", "options": (Option("s", "Small"), Option("l", "l"))},
        ),
        (
            {
                "type": "array",
                "items": {"type": "string", "enum": ["x", "y"]},
                "minItems": 1,
                "maxItems": 2,
                "default": ["y"],
            },
            {"kind": "multi_enum", "min_items": 1, "max_items": 2, "default": ("y",)},
        ),
        (
            {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}]}},
            {"kind": "multi_enum", "options": (Option("x", "Ex"),)},
        ),
    ],
)
def test_constructs(prop: dict[str, Any], expected: dict[str, Any]) -> None:
    field = one(prop)
    for attr, value in expected.items():
        assert getattr(field, attr) == value, attr


def test_required_order_and_title() -> None:
    form = form_from_schema(
        {
            "type": "object",
            "properties": {"b": {"type": "string"}, "a": {"type": "boolean"}},
            "required": ["a"],
        }
    )
    assert [(f.name, f.required) for f in form.fields] == [("b", False), ("a", True)]
    assert form.field("a") is form.fields[1] and form.field("zz") is None


@pytest.mark.parametrize(
    ("schema", "note"),
    [
        (None, "the schema is not an object"),
        ({"type": "array"}, "not 'object'"),
        ({"properties": []}, "properties are not an object"),
        ({"properties": {"f": 3}}, "f: not a schema object"),
        ({"properties": {"f": {"type": "object"}}, "required": ["f"]}, "(required)"),
        ({"properties": {"f": {"type": "null"}}}, "f: type 'null' is not a form primitive"),
        ({"properties": {"f": {"enum": [1, 2]}}}, "f: enum values must be strings"),
        ({"properties": {"f": {"enum": []}}}, "f: its choices are empty or repeated"),
        ({"properties": {"f": {"enum": ["a", "a"]}}}, "repeated"),
        ({"properties": {"f": {"oneOf": [{"title": "x"}]}}}, "{const: string"),
        ({"properties": {"f": {"type": "array"}}}, "f: its items are not a schema object"),
        ({"properties": {"f": {"type": "array", "items": {"type": "string"}}}}, "no enum"),
        ({"properties": {"f": {"type": "string", "format": "ipv4"}}}, "treated as text"),
        ({"properties": {"f": {"type": "integer", "default": 1.5}}}, "default 1.5 ignored"),
        ({"properties": {"f": {"enum": ["a"], "default": "b"}}}, "not one of the options"),
        ({"properties": {}, "required": ["ghost"]}, "ghost: required but not described"),
    ],
)
def test_unsupported_is_named(schema: Any, note: str) -> None:
    form = form_from_schema(schema)
    assert any(note in n for n in form.unsupported), form.unsupported


def test_unknown_format_is_still_a_field_and_bad_default_is_dropped() -> None:
    form = form_from_schema({"properties": {"f": {"type": "integer", "default": "x"}}})
    assert form.fields[0].default is None
    assert (
        form_from_schema({"properties": {"f": {"type": "string", "format": "ipv4"}}}).fields[0].kind
        == "string"
    )


@pytest.mark.parametrize(
    ("prop", "raw", "value"),
    [
        ({"type": "string"}, " spaced ", " spaced "),
        ({"type": "string"}, "", None),
        ({"type": "string", "format": "email"}, " a@b.co ", "a@b.co"),
        ({"type": "string", "format": "uri"}, "https://x.org/a?b=1", "https://x.org/a?b=1"),
        ({"type": "string", "format": "date"}, "2024-02-29", "2024-02-29"),
        ({"type": "string", "format": "date-time"}, "2026-01-31T09:30:00Z", "2026-01-31T09:30:00Z"),
        (
            {"type": "string", "format": "date-time"},
            "2026-01-31t09:30:00.5+02:00",
            "2026-01-31t09:30:00.5+02:00",
        ),
        ({"type": "integer"}, " -12 ", -12),
        ({"type": "number"}, "3", 3),
        ({"type": "number"}, "2.50", 2.5),
        ({"type": "number"}, "-1e3", -1000.0),
        ({"type": "boolean"}, "Yes", True),
        ({"type": "boolean"}, "off", False),
        ({"enum": ["r", "g"], "enumNames": ["Red", "Green"]}, "g", "g"),
        ({"enum": ["r", "g"], "enumNames": ["Red", "Green"]}, "Red", "r"),
        ({"enum": ["r", "g"], "enumNames": ["Red", "Green"]}, "green", "g"),
        ({"type": "array", "items": {"enum": ["a", "b", "c"]}}, "c, a,, A", ["c", "a"]),
        ({"type": "array", "items": {"enum": ["a"]}}, "   ", None),
        ({"type": "array", "items": {"enum": ["a"]}, "title": "T"}, "   ", []),
    ],
)
def test_coerce(prop: dict[str, Any], raw: str, value: Any) -> None:
    assert coerce(one(prop, required="title" in prop), raw) == value


@pytest.mark.parametrize(
    ("prop", "raw", "message"),
    [
        ({"type": "string", "title": "Name"}, "  ", "Name: an answer is required"),
        ({"type": "string", "minLength": 3}, "ab", "f: must be at least 3 characters"),
        ({"type": "string", "maxLength": 1}, "ab", "f: must be at most 1 characters"),
        ({"type": "string", "format": "email"}, "a@@b", "not a valid email address"),
        ({"type": "string", "format": "email"}, "a b@c", "not a valid email address"),
        ({"type": "string", "format": "email"}, "a@-b.c", "not a valid email address"),
        ({"type": "string", "format": "uri"}, "example.org", "not an absolute URI"),
        ({"type": "string", "format": "uri"}, "https:", "not an absolute URI"),
        ({"type": "string", "format": "date"}, "2023-02-29", "not a date like"),
        ({"type": "string", "format": "date"}, "31/01/2026", "not a date like"),
        ({"type": "string", "format": "date-time"}, "2026-01-31T09:30:00", "not a date-time"),
        ({"type": "string", "format": "date-time"}, "2026-01-31T25:00:00Z", "not a date-time"),
        ({"type": "integer"}, "1.5", "f: expected a whole number, got '1.5'"),
        ({"type": "integer"}, "1" * 5000, "expected a whole number"),
        ({"type": "integer", "minimum": 1}, "0", "f: must be at least 1"),
        ({"type": "number", "maximum": 2.5}, "3", "f: must be at most 2.5"),
        ({"type": "number"}, "nan", "f: expected a number"),
        ({"type": "number"}, "1e999", "expected a number"),
        ({"type": "number"}, "1_000", "expected a number"),
        ({"type": "boolean"}, "maybe", "expected yes or no"),
        ({"enum": ["ab", "AB"]}, "Ab", "'Ab' is not one of the options: ab, AB"),
        ({"enum": ["a"]}, "z", "not one of the options"),
        ({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2}, "a", "select at least 2"),
        (
            {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 1},
            "a,b",
            "select at most 1",
        ),
        ({"type": "array", "items": {"enum": ["a"]}}, "a, q", "'q' is not one of the options"),
        ({"type": "string"}, "x" * 10_001, "at most 10000 characters"),
    ],
)
def test_coerce_errors(prop: dict[str, Any], raw: str, message: str) -> None:
    with pytest.raises(FormInputError) as info:
        coerce(one(prop, required="title" in prop), raw)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_field_problems_reports_every_problem() -> None:
    field = one({"type": "array", "items": {"enum": ["a"]}, "maxItems": 1})
    problems = field_problems(field, ["a", "a", 3])
    assert any("3 is not one of" in p for p in problems)
    assert "a choice is selected more than once" in problems
    assert "select at most 1 (got 3)" in problems
    assert field_problems(one({"type": "number"}), True) == ["expected a number, got True"]
    assert field_problems(one({"type": "integer"}), 2.0) == []
    assert field_problems(one({"enum": ["a"]}), ["a"]) != []


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"mode": "form", "requestedSchema": {}}, None),
        ({"requestedSchema": {}}, None),
        (
            {
                "mode": "url",
                "url": "https://auth.example.com/x?y=1",
                "elicitationId": "e1",
                "message": "Sign in",
            },
            ("auth.example.com", "e1", "Sign in"),
        ),
    ],
)
def test_url_request(params: dict[str, Any], expected: tuple[str, str, str] | None) -> None:
    request = url_request(params)
    if expected is None:
        assert request is None
    else:
        assert request is not None
        assert (request.host, request.elicitation_id, request.message) == expected
        assert request.url == params["url"]


@pytest.mark.parametrize(
    "params",
    [
        {"mode": "url", "elicitationId": "e"},
        {"mode": "url", "url": "javascript:alert(1)", "elicitationId": "e"},
        {"mode": "url", "url": "https:///nohost", "elicitationId": "e"},
        {"mode": "url", "url": "https://x.org"},
        {"mode": "url", "url": "https://x.org", "elicitationId": ""},
    ],
)
def test_url_request_errors(params: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        url_request(params)


# --- shared strategies: random form schemas and valid answers --------------------------

_SAFE = string.ascii_letters + string.digits + " -_é"
names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
choices = st.lists(
    st.text(_SAFE, min_size=1, max_size=6).filter(lambda s: s.strip() == s),
    min_size=1,
    max_size=5,
    unique_by=str.casefold,
)
emails = st.builds(
    "{}@{}".format,
    st.from_regex(r"[a-z0-9._+]{1,8}", fullmatch=True),
    st.from_regex(r"[a-z0-9]{1,6}(\.[a-z]{2,4}){0,2}", fullmatch=True),
)
uris = st.from_regex(r"https?://[a-z0-9]{1,8}\.[a-z]{2,3}(/[a-z0-9]{0,5}){0,3}", fullmatch=True)
dates = st.dates().map(lambda d: d.isoformat())
datetimes = st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat())
_FORMATTED = {"email": emails, "uri": uris, "date": dates, "date-time": datetimes}


@st.composite
def fields(draw: st.DrawFn) -> tuple[dict[str, Any], st.SearchStrategy[Any]]:
    """A property schema and a strategy for its valid values."""
    kind = draw(st.sampled_from(["string", "fmt", "integer", "number", "boolean", "enum", "multi"]))
    prop: dict[str, Any]
    if kind == "string":
        lo = draw(st.integers(0, 3))
        hi = draw(st.none() | st.integers(max(lo, 1), lo + 6))
        prop = {"type": "string", "minLength": lo} | ({} if hi is None else {"maxLength": hi})
        values: st.SearchStrategy[Any] = st.text(
            _SAFE, min_size=max(lo, 1), max_size=lo + 6 if hi is None else hi
        )
        values = values.filter(lambda s: s.strip() != "" and lo <= len(s))
    elif kind == "fmt":
        fmt = draw(st.sampled_from(sorted(_FORMATTED)))
        prop, values = {"type": "string", "format": fmt}, _FORMATTED[fmt]
    elif kind in ("integer", "number"):
        lo = draw(st.integers(-50, 50))
        hi = draw(st.integers(lo, lo + 100))
        prop = {"type": kind, "minimum": lo, "maximum": hi}
        values = st.integers(lo, hi)
        if kind == "number":
            values |= st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    elif kind == "boolean":
        prop, values = {"type": "boolean"}, st.booleans()
    else:
        opts = draw(choices)
        titled = draw(st.booleans())
        spec = (
            {
                "anyOf" if kind == "multi" else "oneOf": [
                    {"const": o, "title": o.upper()} for o in opts
                ]
            }
            if titled
            else {"enum": opts}
        )
        if kind == "enum":
            prop, values = {"type": "string", **spec}, st.sampled_from(opts)
        else:
            lo = draw(st.integers(0, len(opts)))
            hi = draw(st.integers(lo, len(opts)))
            prop = {"type": "array", "items": spec, "minItems": lo, "maxItems": hi}
            values = st.lists(st.sampled_from(opts), min_size=lo, max_size=hi, unique=True)
    if draw(st.booleans()):
        prop["default"] = draw(values)
    if draw(st.booleans()):
        prop["title"] = draw(st.text(_SAFE, min_size=1, max_size=8))
    return prop, values


@st.composite
def schemas_with_answers(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A random form schema and a valid answer to it."""
    specs = draw(st.dictionaries(names, fields(), min_size=1, max_size=6))
    required = [n for n in specs if draw(st.booleans())]
    schema = {
        "type": "object",
        "properties": {n: p for n, (p, _) in specs.items()},
        "required": required,
    }
    answer = {
        n: draw(values) for n, (_, values) in specs.items() if n in required or draw(st.booleans())
    }
    return schema, answer


@settings(max_examples=200)
@given(schemas_with_answers())
def test_random_schemas_are_fully_supported(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, _ = case
    form = form_from_schema(schema)
    assert form.unsupported == ()
    assert [f.name for f in form.fields] == list(schema["properties"])


@settings(max_examples=200)
@given(schemas_with_answers())
def test_coerce_reads_back_to_text(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, answer = case
    form = form_from_schema(schema)
    for name, value in answer.items():
        field = form.field(name)
        assert field is not None
        if value == [] and not field.required:
            continue  # empty input means "no answer"
        assert coerce(field, to_text(field, value)) == value
        assert field_problems(field, value) == []
        if field.default is not None and field.default != ():
            assert coerce(field, to_text(field, field.default)) == (
                list(field.default) if isinstance(field.default, tuple) else field.default
            )


@given(st.text(max_size=30))
def test_coerce_raises_only_form_input_errors(raw: str) -> None:
    for prop in (
        {"type": "integer"},
        {"type": "number"},
        {"type": "string", "format": "date"},
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "email"},
        {"type": "string", "format": "uri"},
        {"type": "boolean"},
        {"enum": ["a"]},
        {"type": "array", "items": {"enum": ["a"]}},
    ):
        try:
            coerce(one(prop), raw)
        except FormInputError as exc:
            assert str(exc).startswith("f: ")
