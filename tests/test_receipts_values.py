"""Ids, digests, summaries, intents and model bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chit.receipts import (
    SUMMARY_MAX,
    IntentState,
    IntentTransitionError,
    Outcome,
    advance_intent,
    args_digest,
    id_time,
    is_local_id,
    new_intent,
    new_receipt_id,
    result_digest,
    resume_intent,
    retry_intent,
    structured_keys,
    summarize_result,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


def test_receipt_ids_sort_by_time_and_decode() -> None:
    a = new_receipt_id(T0)
    b = new_receipt_id(T0 + timedelta(milliseconds=1))
    assert len(a) == 26 and is_local_id(a) and a < b
    assert id_time(a) == T0
    assert new_receipt_id(T0, b"\0" * 10) == new_receipt_id(T0, b"\0" * 10)
    with pytest.raises(ValueError):
        new_receipt_id(datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        id_time("not-an-id")


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=5))
def test_args_digest_is_canonical(arguments: dict[str, object]) -> None:
    reordered = dict(reversed(list(arguments.items())))
    assert args_digest(arguments) == args_digest(reordered)
    assert args_digest(arguments).startswith("sha256:")
    keyed = args_digest(arguments, key=b"k" * 32)
    assert keyed.startswith("hmac-sha256:") and keyed != args_digest(arguments, key=b"j" * 32)


def test_digests_differ_for_different_values() -> None:
    assert args_digest({"a": 1}) != args_digest({"a": 2})
    assert args_digest(None) == args_digest({})
    assert result_digest({"content": []}) != result_digest({"content": [1]})


@settings(max_examples=200)
@given(st.text(max_size=3000))
def test_summary_is_bounded(text: str) -> None:
    assert len(summarize_result(text)) <= SUMMARY_MAX
    assert len(summarize_result({"content": [{"type": "text", "text": text}]})) <= SUMMARY_MAX


def test_summary_describes_binary_and_redacts_secrets() -> None:
    result = {
        "content": [
            {"type": "text", "text": "token=abcd1234secret and Bearer eyJhbGciOiJIUzI1NiJ9xyz"},
            {"type": "image", "mimeType": "image/png", "data": "A" * 4000},
        ],
        "structuredContent": {"b": 1, "a": 2},
    }
    summary = summarize_result(result)
    assert "abcd1234secret" not in summary and "eyJhbGci" not in summary
    assert "[image image/png" in summary and "AAAA" not in summary
    assert structured_keys(result) == ("a", "b")
    assert summarize_result({"structuredContent": {"x": 1}}) == "structured result with x"


def test_outcome_summary_is_cut_on_validation() -> None:
    outcome = Outcome(summary="x" * 2000, retrieved_at=T0)
    assert len(outcome.summary) == SUMMARY_MAX and outcome.summary.endswith("…")


def test_intent_lifecycle() -> None:
    intent = new_intent(request_key="k", server="s", tool="t", args_digest="d", now=T0)
    assert intent.state is IntentState.SENDING
    with pytest.raises(IntentTransitionError):
        advance_intent(intent, IntentState.ACCEPTED, T0)  # no receipt id
    accepted = advance_intent(intent, IntentState.ACCEPTED, T0, receipt_id="r")
    assert accepted.receipt_id == "r"
    with pytest.raises(IntentTransitionError):
        advance_intent(accepted, IntentState.REJECTED, T0)
    assert resume_intent(accepted, T0) is accepted
    unknown = resume_intent(intent, T0 + timedelta(seconds=1))
    assert unknown.state is IntentState.UNKNOWN and unknown.error
    old, new = retry_intent(unknown, T0, "k2")
    assert old.state is IntentState.RETRIED and new.attempts == 2 and new.request_key == "k2"
    with pytest.raises(IntentTransitionError):
        retry_intent(intent, T0, "k3")  # only an unknown intent may be retried
