"""chit.redaction: every spelling of a handle or sealed secret is replaced, nothing else."""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chit.redaction import (
    FRAGMENT,
    MIN_SECRET,
    REGISTRY,
    RedactingFilter,
    Redactor,
    Secret,
    config_secrets,
    handle_secret,
    redact,
    task_marker,
)
from tests.leak_support import SPELLINGS, filler, handles, leaks, spelling_names

FP = "0123456789ab"
MARK = task_marker(FP)


def _redactor(handle: str) -> Redactor:
    return Redactor([handle_secret(handle, FP)])


@pytest.fixture(autouse=True)
def _clean_registry() -> None:
    REGISTRY.clear()


@settings(max_examples=300, deadline=None)
@given(handle=handles, spelling=spelling_names, before=filler, after=filler)
@example(handle="3f2a9c1e-7b7d-4e2a", spelling="url-double", before="", after="")
@example(handle="abcDEF123456", spelling="json-in-json", before="\\", after="%")
def test_every_spelling_is_replaced(handle: str, spelling: str, before: str, after: str) -> None:
    text = before + SPELLINGS[spelling](handle) + after
    out = _redactor(handle).text(text)
    assert MARK in out
    assert not leaks(out.encode(), [handle])
    assert not _redactor(handle).finds(out), out  # nothing recognisable is left


@settings(max_examples=200, deadline=None)
@given(handle=handles, cut=st.integers(0, 48), status=filler, error=filler)
@example(handle="000000012345", cut=5, status="", error="")
def test_a_handle_split_between_two_fields_leaves_no_long_piece(
    handle: str, cut: int, status: str, error: str
) -> None:
    cut = min(cut, len(handle))
    r = _redactor(handle)
    first = r.text(status + handle[:cut])
    second = r.text(handle[cut:] + error)
    for piece in (first, second):
        for i in range(len(handle) - FRAGMENT + 1):
            assert handle[i : i + FRAGMENT].lower() not in piece.lower()
    if len(handle) >= 2 * FRAGMENT:
        # one side holds at least FRAGMENT characters of it: even put back together, the
        # two fields do not spell it (two pieces shorter than that cannot be recognised)
        assert not leaks((first + second).encode(), [handle])


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), handle=handles)
def test_text_without_the_handle_is_unchanged(text: str, handle: str) -> None:
    r = _redactor(handle)
    if r.finds(text):
        return  # hypothesis put a piece of the handle in: covered above
    assert r.text(text) == text


def test_redaction_is_idempotent_and_keeps_the_rest() -> None:
    h = "Zx81-task-7781a9Qp"
    r = _redactor(h)
    once = r.text(f"Task {h} not found; retry in 3 s")
    assert once == f"Task {MARK} not found; retry in 3 s"
    assert r.text(once) == once


def test_a_repeated_text_gets_the_same_answer_from_each_redactor() -> None:
    # Each redactor remembers its last text (a receipt's status message, check after
    # check): the answer is still its own, whatever came between.
    h1, h2 = "Zx81-task-7781a9Qp", "Qq42-task-0042bbZz"
    r1, r2 = _redactor(h1), Redactor([handle_secret(h2, "ba9876543210")])
    both = f"one {h1} two {h2}"
    for _ in range(3):
        assert r1.text(both) == f"one {MARK} two {h2}"
        assert r2.text(both) == f"one {h1} two task#ba9876543210"
        assert r1.text("nothing here") == "nothing here"
        assert r1.text(h1) == MARK
    long = f"{'x' * 2000} {h1}"
    assert r1.text(long) == r1.text(long) == f"{'x' * 2000} {MARK}"


def test_short_values_are_left_alone() -> None:
    assert Redactor([Secret("ab1", "secret#x")]).text("ab1 ab1") == "ab1 ab1"
    assert len("abcd") == MIN_SECRET
    assert Redactor([Secret("abcd", "S")]).text("xabcdx ABCD") == "xSx S"


def test_config_secrets_include_the_credential_part() -> None:
    parts = config_secrets("api", "headers", "Authorization", "Bearer sk-live-4242424242")
    assert [p.value for p in parts] == ["Bearer sk-live-4242424242", "sk-live-4242424242"]
    assert {p.marker for p in parts} == {"secret#api.headers.Authorization"}
    url = config_secrets("db", "env", "DATABASE_URL", "postgres://u:p%40ssw0rd!@h/db")
    assert "p@ssw0rd!" in [p.value for p in url]
    r = Redactor(parts)
    assert r.text("token sk-live-4242424242 refused") == (
        "token secret#api.headers.Authorization refused"
    )


def test_json_values_and_keys_are_redacted() -> None:
    h = "k3y-abcdef-123456"
    schema = {"properties": {f"answer-{h}": {"description": f"for {quote(h)}"}}}
    out = _redactor(h).value(schema)
    assert h not in json.dumps(out)
    assert MARK in json.dumps(out)


def test_many_secrets_use_the_index_and_agree() -> None:
    secrets = [handle_secret(f"handle-{i:04d}-{i * 7919:08x}", f"{i:012x}") for i in range(50)]
    r = Redactor(secrets)
    text = f"a {secrets[3].value} b {quote(secrets[40].value)} c"
    assert r.text(text) == f"a task#{3:012x} b task#{40:012x} c"


def test_log_records_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    h = "log-handle-77aa99bb"
    REGISTRY.remember_handle(h, FP)
    log = logging.getLogger("chit.test.redaction")
    with caplog.at_level(logging.INFO):
        log.info("tasks/get %s failed: %r", "x", {"taskId": h})
        try:
            raise RuntimeError(f"Task {h} not found")
        except RuntimeError:
            log.exception("check failed")
    text = "\n".join(caplog.messages) + caplog.text
    assert h not in text
    assert MARK in text
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "x %s", (h,), None)
    assert RedactingFilter().filter(record)
    assert h not in record.getMessage()


def test_registry_redacts_error_messages() -> None:
    from chit.errors import ChitError

    h = "err-handle-55cc66dd"
    REGISTRY.remember_handle(h, FP)
    REGISTRY.remember_server("api", config_secrets("api", "env", "API_KEY", "s3cr3t-v4lue"))
    assert redact(f"{h} with s3cr3t-v4lue") == f"{MARK} with secret#api.env.API_KEY"
    assert ChitError(f"server said: Task {h} not found").message == (
        f"server said: Task {MARK} not found"
    )
