"""Elicitation answers: every problem is reported and names its field; defaults fill in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chit.receipts.answers import fill_defaults, validate_answer
from chit.receipts.forms import form_from_schema
from tests.test_receipts_forms import schemas_with_answers

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "due": {"type": "string", "format": "date", "default": "2026-01-31"},
        "at": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 0, "maximum": 120, "default": 30},
        "ratio": {"type": "number", "minimum": 0.5, "maximum": 1},
        "ok": {"type": "boolean", "default": True},
        "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "S"}], "default": "s"},
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "minItems": 1,
            "maxItems": 2,
            "default": ["a"],
        },
        "nested": {"type": "object"},
    },
    "required": ["name", "age"],
}
VALID = {"name": "bob", "age": 41}


def test_a_valid_answer_has_no_problems() -> None:
    full = VALID | {
        "email": "b@x.org",
        "site": "https://x.org",
        "due": "2026-02-01",
        "at": "2026-02-01T08:00:00+01:00",
        "ratio": 1,
        "ok": False,
        "color": "g",
        "size": "s",
        "tags": ["b", "c"],
    }
    assert validate_answer(SCHEMA, VALID) == []
    assert validate_answer(SCHEMA, full) == []
    assert validate_answer(SCHEMA, VALID | {"age": 41.0}) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"name": None}, "name: required"),
        ({"age": None}, "age: required"),
        ({"name": "b"}, "name: must be at least 2 characters"),
        ({"name": "bobbobbob"}, "name: must be at most 5 characters"),
        ({"name": 5}, "name: expected text, got 5"),
        ({"email": "nope"}, "email: not a valid email address"),
        ({"site": "x.org"}, "site: not an absolute URI"),
        ({"due": "2026-13-01"}, "due: not a date like 2026-01-31"),
        ({"at": "2026-01-01"}, "at: not a date-time like"),
        ({"age": "41"}, "age: expected a number, got '41'"),
        ({"age": True}, "age: expected a number, got True"),
        ({"age": 4.5}, "age: expected a whole number, got 4.5"),
        ({"age": -1}, "age: must be at least 0"),
        ({"age": 121}, "age: must be at most 120"),
        ({"ratio": 0.25}, "ratio: must be at least 0.5"),
        ({"ratio": float("nan")}, "ratio: expected a number"),
        ({"ok": "true"}, "ok: expected true or false, got 'true'"),
        ({"ok": 1}, "ok: expected true or false"),
        ({"color": "Red"}, "color: 'Red' is not one of the options: r, g"),
        ({"size": "m"}, "size: 'm' is not one of the options: s"),
        ({"tags": "a"}, "tags: expected a list of choices, got 'a'"),
        ({"tags": []}, "tags: select at least 1 (got 0)"),
        ({"tags": ["a", "b", "c"]}, "tags: select at most 2 (got 3)"),
        ({"tags": ["a", "a"]}, "tags: a choice is selected more than once"),
        ({"tags": ["z"]}, "tags: 'z' is not one of the options: a, b, c"),
        ({"color": None}, "color: None is not one of the options"),
        ({"extra": 1}, "extra: unknown field (the form has age, at, color, due, email, name, ok"),
        ({"nested": {}}, "nested: its schema is not supported, so chit cannot check it"),
    ],
)
def test_each_problem_names_its_field(change: dict[str, Any], problem: str) -> None:
    answer = {k: v for k, v in (VALID | change).items() if not (v is None and k in VALID)}
    problems = validate_answer(SCHEMA, answer)
    assert any(p.startswith(problem) for p in problems), problems
    assert len(problems) == 1, problems


def test_every_problem_is_reported_in_schema_order() -> None:
    problems = validate_answer(SCHEMA, {"zz": 1, "ok": "x", "name": 1})
    assert [p.split(":")[0] for p in problems] == ["name", "age", "ok", "zz"]


@pytest.mark.parametrize(
    ("schema", "content", "problem"),
    [
        (SCHEMA, [], "the answer must be an object of field values"),
        (SCHEMA, None, "the answer must be an object"),
        (
            {"properties": {"x": {"type": "object"}}, "required": ["x"]},
            {},
            "x: required, but chit cannot build a field for it",
        ),
        ({"properties": {}, "required": ["ghost"]}, {}, "ghost: required, but chit cannot"),
        (None, {"a": 1}, "a: unknown field (the form has no fields)"),
    ],
)
def test_schema_level_problems(schema: Any, content: Any, problem: str) -> None:
    problems = validate_answer(schema, content)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_fill_defaults_adds_only_absent_valid_defaults() -> None:
    schema = SCHEMA | {
        "properties": SCHEMA["properties"] | {"bad": {"type": "integer", "default": "x"}}
    }
    answer = {"name": "bob", "age": 7, "extra": True}
    filled = fill_defaults(schema, answer)
    assert filled == answer | {"due": "2026-01-31", "ok": True, "size": "s", "tags": ["a"]}
    assert answer == {"name": "bob", "age": 7, "extra": True}  # not mutated
    assert isinstance(filled["tags"], list)
    assert validate_answer(SCHEMA, fill_defaults(SCHEMA, {"name": "al"})) == []


# --- properties -------------------------------------------------------------------------

Case = tuple[dict[str, Any], dict[str, Any]]

_WRONG: dict[str, list[Any]] = {
    "string": [7, None, ["x"]],
    "email": ["no-at-sign", 1],
    "uri": ["no scheme", False],
    "date": ["2026-02-30", "yesterday"],
    "datetime": ["2026-01-01", "noon"],
    "integer": ["1", 1.5, True, None],
    "number": ["1", True, float("inf")],
    "boolean": ["yes", 0, None],
    "enum": ["\x00not-an-option", 3],
    "multi_enum": ["\x00not-a-list", ["\x00nope"], [1]],
}


@settings(max_examples=300)
@given(schemas_with_answers())
def test_valid_answers_validate_cleanly(case: Case) -> None:
    schema, answer = case
    assert validate_answer(schema, answer) == []
    assert validate_answer(schema, fill_defaults(schema, answer)) == []


@settings(max_examples=300)
@given(schemas_with_answers(), st.data())
def test_one_bad_field_is_named(case: Case, data: st.DataObject) -> None:
    schema, answer = case
    form = form_from_schema(schema)
    field = data.draw(st.sampled_from(form.fields))
    bad = data.draw(st.sampled_from(_WRONG[field.kind]))
    problems = validate_answer(schema, answer | {field.name: bad})
    assert problems
    assert all(p.startswith(f"{field.name}: ") for p in problems), problems


@settings(max_examples=200)
@given(schemas_with_answers(), st.data())
def test_dropping_a_required_field_or_adding_an_unknown_one_is_named(
    case: Case, data: st.DataObject
) -> None:
    schema, answer = case
    if schema["required"]:
        name = data.draw(st.sampled_from(schema["required"]))
        rest = {k: v for k, v in answer.items() if k != name}
        assert validate_answer(schema, rest) == [f"{name}: required"]
    unknown = "Z" + data.draw(st.text(max_size=4))
    problems = validate_answer(schema, answer | {unknown: 1})
    assert len(problems) == 1 and problems[0].startswith(f"{unknown}: unknown field")


@settings(max_examples=100)
@given(schemas_with_answers())
def test_fill_defaults_never_overrides_an_answer(case: Case) -> None:
    schema, answer = case
    filled = fill_defaults(schema, answer)
    assert {k: filled[k] for k in answer} == answer
    for field in form_from_schema(schema).fields:
        assert (field.name in filled) == (field.name in answer or field.default is not None)
