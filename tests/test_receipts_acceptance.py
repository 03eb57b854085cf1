"""The acceptance-check language: parsing, normalization, errors and evaluation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chit.receipts.acceptance import (
    CHECK_MAX,
    AcceptanceSyntaxError,
    evaluate,
    parse_check,
    result_text,
)


def text_result(*texts: str, is_error: bool | None = None, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": t} for t in texts], **extra}
    if is_error is not None:
        result["isError"] = is_error
    return result


OK = text_result("job done: 3 rows", is_error=False)
FAILED = text_result("boom", is_error=True)
STRUCTURED = {
    "content": [{"type": "text", "text": "see structured"}],
    "structuredContent": {"items": [{"id": 7, "ok": True}], "n": 2.5, "odd key": "x", "0": "z"},
}
JSON_TEXT = text_result("not json", '{"items": [{"id": "a"}], "count": 1}')


@pytest.mark.parametrize(
    ("expr", "normalized"),
    [
        ("not isError", "not isError"),
        ("  isError  ", "isError"),
        ('text contains "done"', 'text contains "done"'),
        ('text   contains "a\\"b\\u00e9"', 'text contains "a\\"bé"'),
        ("json $.items[0].id exists", "json $.items[0].id exists"),
        ("json items.0.id == 7", "json $.items[0].id == 7"),
        ('json $["odd key"] == "x"', 'json $["odd key"] == "x"'),
        ('json $["plain"] != null', "json $.plain != null"),
        ("json $.a==1", "json $.a == 1"),
        ('json $ == {"b": [1, true], "a": null}', 'json $ == {"a":null,"b":[1,true]}'),
        ("json $.n >= 2.5", "json $.n >= 2.5"),
        ("json $.n < -1e2", "json $.n < -100.0"),
        ("isError and not isError or isError", "(isError and not isError) or isError"),
        ("(isError or isError) and isError", "(isError or isError) and isError"),
        ("((isError))", "isError"),
        ("not (isError and isError)", "not (isError and isError)"),
        ("isError or (isError or isError)", "isError or isError or isError"),
        ("not not isError", "not not isError"),
    ],
)
def test_parse_normalizes(expr: str, normalized: str) -> None:
    check = parse_check(expr)
    assert check.text == normalized
    assert parse_check(check.text) == check


@pytest.mark.parametrize(
    ("expr", "column", "expected"),
    [
        ("", 1, "found nothing"),
        ("   ", 1, "found nothing"),
        ("bogus", 1, 'expected "isError", "text", "json", "not" or "("'),
        ("isError and", 12, "found end of expression"),
        ("isError or or isError", 12, "found 'or'"),
        ("isError isError", 9, 'expected "and", "or" or the end'),
        ("(isError", 9, 'expected ")"'),
        ("isError)", 8, 'expected "and", "or" or the end'),
        ("text", 5, '"contains" or "matches" after "text"'),
        ("text has", 6, "found 'has'"),
        ("text matches /a/", 6, '"matches" is not offered'),
        ("text contains done", 15, "double-quoted string"),
        ('text contains "open', 15, "JSON value"),
        ("json", 5, "a path like"),
        ("json $.", 8, "a path like"),
        ("json $.a[", 10, "an index or a"),
        ("json $.a[0", 11, '"]"'),
        ("json $.a", 9, '"exists" or a comparison'),
        ("json $.a is 1", 10, '"exists" or a comparison'),
        ("json $.a == done", 13, "JSON value"),
        ("json $.a == NaN", 13, "JSON value"),
        ("json $.a == 1e999", 13, "JSON value"),
        ("json $.a == " + "[" * 40 + "]" * 40, 13, "nested at most"),
        ("not " * 40 + "isError", 129, "nested"),
        ("ISERROR", 1, "found 'ISERROR'"),
        ("x" * (CHECK_MAX + 1), CHECK_MAX + 1, "at most"),
    ],
)
def test_syntax_errors(expr: str, column: int, expected: str) -> None:
    with pytest.raises(AcceptanceSyntaxError) as info:
        parse_check(expr)
    message = str(info.value)
    assert info.value.column == column, message
    assert expected in message
    assert message.startswith(f"column {column}: expected ")
    assert "\n" not in message
    assert isinstance(info.value, ValueError)


def test_non_text_is_a_syntax_error() -> None:
    with pytest.raises(AcceptanceSyntaxError):
        parse_check(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expr", "result", "accepted", "why"),
    [
        ("not isError", OK, True, "not isError: isError is false"),
        ("not isError", FAILED, False, "not isError: isError is true"),
        ("not isError", {"content": []}, True, "isError is false"),
        ("isError", FAILED, True, "isError: isError is true"),
        ("isError", {"isError": "yes"}, False, "isError is false"),
        ('text contains "done"', OK, True, "found in 16 characters"),
        ('text contains "DONE"', OK, False, 'text contains "DONE": not found'),
        ('text contains "a\\nb"', text_result("a", "b"), True, "found"),
        ('text contains "x"', {"content": "nope"}, False, "not found in 0"),
        ('text contains "x"', {"content": [{"type": "image", "text": "x"}]}, False, "not found"),
        ("json $.items[0].id == 7", STRUCTURED, True, "$.items[0].id is 7 in structuredContent"),
        ("json $.items[0].id == 7.0", STRUCTURED, True, "is 7"),
        ("json $.items[0].ok == 1", STRUCTURED, False, "is true"),
        ("json $.items[0].ok == true", STRUCTURED, True, "is true"),
        ("json $.items[-1].id != 8", STRUCTURED, True, "is 7"),
        ("json $.items[1] exists", STRUCTURED, False, "$.items[1] is missing (list length 1)"),
        ("json $.items.id exists", STRUCTURED, False, "$.items is [{"),
        ("json $.n.x exists", STRUCTURED, False, "$.n is 2.5"),
        ('json $["odd key"] == "x"', STRUCTURED, True, "in structuredContent"),
        ('json $[0] == "z"', STRUCTURED, True, 'is "z"'),
        ("json $.n > 2", STRUCTURED, True, "is 2.5"),
        ("json $.n <= 2", STRUCTURED, False, "is 2.5"),
        ('json $.n < "3"', STRUCTURED, False, "cannot be compared with <"),
        ('json $["odd key"] < "y"', STRUCTURED, True, 'is "x"'),
        ("json $.missing exists", STRUCTURED, False, "$.missing is missing in structuredContent"),
        ("json $.count == 1", JSON_TEXT, True, "in the JSON text block"),
        ('json items.0.id == "a"', JSON_TEXT, True, 'is "a"'),
        ("json $ exists", OK, False, "no structuredContent and no JSON text block"),
        ("json $ exists", {"structuredContent": None, "content": []}, False, "no structured"),
        ('json $ == {"a": [1]}', {"structuredContent": {"a": [1.0]}}, True, "is {"),
        ('json $ == {"a": [1]}', {"structuredContent": {"a": [1], "b": 2}}, False, "is {"),
        ('not isError and text contains "done"', OK, True, "not isError: isError is false; "),
        ('not isError and text contains "zzz"', OK, False, 'text contains "zzz": not found'),
        ('isError or text contains "done"', OK, True, 'text contains "done": found'),
        ('isError or text contains "zzz"', OK, False, "isError: isError is false; text"),
        ('not (isError or text contains "done")', OK, False, "not (isError or text contains"),
        ("not not isError", FAILED, True, "not not isError: isError is true"),
    ],
)
def test_evaluate(expr: str, result: dict[str, Any], accepted: bool, why: str) -> None:
    verdict = evaluate(parse_check(expr), result)
    assert verdict.accepted is accepted, verdict.why
    assert why in verdict.why


def test_long_values_are_cut_in_why() -> None:
    verdict = evaluate(parse_check("json $.a exists"), {"structuredContent": {"a": "x" * 500}})
    assert verdict.accepted and len(verdict.why) < 120 and "…" in verdict.why


def test_result_text_joins_text_blocks_only() -> None:
    result = {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "image"},
            "junk",
            {"type": "text", "text": "b"},
        ]
    }
    assert result_text(result) == "a\nb"


def test_evaluate_tolerates_a_non_mapping_result() -> None:
    assert not evaluate(parse_check("isError"), None).accepted  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------

VOCAB = [
    "isError",
    "not",
    "and",
    "or",
    "(",
    ")",
    "text",
    "contains",
    "matches",
    "json",
    "exists",
    "==",
    "!=",
    "<",
    ">=",
    '"x"',
    '"',
    "$",
    "$.a",
    "[0]",
    "[",
    "]",
    ".",
    "a.0",
    "1",
    "-2.5e3",
    "true",
    "null",
    "{",
    "}",
    "[1,",
    ",",
    ":",
    "/x/",
    "\\",
    "é",
    " ",
]


@settings(max_examples=300)
@given(st.text(max_size=80) | st.lists(st.sampled_from(VOCAB), max_size=14).map(" ".join))
def test_parser_only_raises_syntax_errors(text: str) -> None:
    try:
        check = parse_check(text)
    except AcceptanceSyntaxError as exc:
        assert 1 <= exc.column <= len(text) + 1 and "\n" not in str(exc)
    else:
        assert parse_check(check.text) == check


json_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=5)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
steps = st.lists(st.integers(-2, 3) | st.text(max_size=4), max_size=3)


def render_path(path: list[Any]) -> str:
    return "$" + "".join(f"[{json.dumps(s)}]" for s in path)


leaves = st.one_of(
    st.just("isError"),
    st.text(max_size=6).map(lambda s: f"text contains {json.dumps(s)}"),
    steps.map(lambda p: f"json {render_path(p)} exists"),
    st.tuples(steps, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), json_values).map(
        lambda t: f"json {render_path(t[0])} {t[1]} {json.dumps(t[2])}"
    ),
)
exprs = st.recursive(
    leaves,
    lambda inner: (
        inner.map(lambda e: f"not {e}")
        | st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        )
    ),
    max_leaves=6,
)
results = st.fixed_dictionaries(
    {},
    optional={
        "isError": st.booleans() | json_scalars,
        "content": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["text", "image"]),
                    "text": st.text(max_size=8) | json_values.map(json.dumps),
                }
            ),
            max_size=3,
        ),
        "structuredContent": json_values,
    },
)


@settings(max_examples=300)
@given(exprs, results)
def test_generated_checks_round_trip_and_evaluate(expr: str, result: dict[str, Any]) -> None:
    check = parse_check(expr)
    assert parse_check(check.text) == check
    verdict = evaluate(check, result)
    negated = evaluate(parse_check(f"not ({check.text})"), result)
    assert negated.accepted is not verdict.accepted
    assert verdict.why


@given(results)
def test_and_or_agree_with_python(result: dict[str, Any]) -> None:
    a, b = "isError", 'text contains "x"'
    va = evaluate(parse_check(a), result).accepted
    vb = evaluate(parse_check(b), result).accepted
    assert evaluate(parse_check(f"{a} and {b}"), result).accepted is (va and vb)
    assert evaluate(parse_check(f"{a} or {b}"), result).accepted is (va or vb)
