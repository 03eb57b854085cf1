"""Bad server input ends in a typed TaskError within the read timeout - never a hang.

Only the cases whose answer *is* the read timeout (silence, a reply the SDK drops, a
dead server: ``transient``) run on the short one; a case that answers (an 8 MiB status
message, a wrong shape) gets a timeout sized for reading and parsing its reply on a
loaded machine, so load can never turn a violation into a timeout.

Two layers: a broken stdio server process (``tests/fakes/bad_server.py``) for transport
level faults, and hypothesis-generated ``tasks/get`` replies through an in-memory
scripted peer (``tests/fakes/memory.py``) for shape faults in both generations.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chit.tasks.client import (
    Mode,
    StdioServer,
    TaskClient,
    TaskError,
    TaskSnapshot,
    TransportServer,
    classify,
)
from tests.fakes.memory import scripted_transport

BAD = Path(__file__).parent / "fakes" / "bad_server.py"
READ_TIMEOUT = 1.5
"""The read timeout under test: where a case's outcome comes from waiting."""
REPLY_TIMEOUT = 20.0
"""Where the server answers: the timeout is not under test, only the reply's handling."""

pytestmark = [pytest.mark.timeout(60)]


def run(coro_fn: Any) -> Any:
    return anyio.run(coro_fn, backend="asyncio")


async def _op(
    behaviour: str, op: str, log: Path, read_timeout: float = READ_TIMEOUT
) -> TaskError | object:
    with open(log, "a") as stderr:
        spec = StdioServer(sys.executable, [str(BAD), behaviour], stderr=stderr)
        async with TaskClient(spec, mode="legacy", read_timeout=read_timeout) as tc:
            try:
                # A hang ends here in TimeoutError, which is not a TaskError: it fails.
                with anyio.fail_after(read_timeout * 2 + 3):
                    if op == "create":
                        return await tc.start("job", {}, request_key="k")
                    if op == "cancel":
                        return await tc.cancel("t1")
                    return await tc.get("t1")
            except TaskError as exc:
                return exc


CASES = [
    ("garbage", "get", "transient"),
    ("wrong_id", "get", "transient"),
    ("silence", "get", "transient"),
    ("exit", "get", "transient"),
    # The SDK drops a frame whose result is not an object before correlating it: timeout.
    ("non_object", "get", "transient"),
    ("wrong_shape", "get", "protocol_violation"),
    ("bad_status", "get", "protocol_violation"),
    ("bad_date", "get", "protocol_violation"),
    ("negative_poll", "get", "protocol_violation"),
    ("other_id", "get", "protocol_violation"),
    ("huge", "get", "protocol_violation"),
    ("error_lost", "get", "lost"),
    ("error_missing", "get", "incompatible"),
    ("bad_status", "cancel", "protocol_violation"),
    ("create_flat", "create", "protocol_violation"),
    ("create_garbage_task", "create", "protocol_violation"),
    ("create_silence", "create", "transient"),
    ("create_error_lost", "create", "permanent"),
    ("create_error_missing", "create", "permanent"),
]


@pytest.mark.parametrize(("behaviour", "op", "expected"), CASES)
def test_bad_server_gives_typed_error(
    behaviour: str, op: str, expected: str, tmp_path: Path
) -> None:
    timeout = READ_TIMEOUT if expected == "transient" else REPLY_TIMEOUT
    outcome = run(lambda: _op(behaviour, op, tmp_path / "stderr.log", timeout))
    assert isinstance(outcome, TaskError), outcome
    assert outcome.failure_class == expected, outcome
    assert outcome.method in ("tools/call", "tasks/get", "tasks/cancel")


def test_well_behaved_fake_parses(tmp_path: Path) -> None:
    outcome = run(lambda: _op("ok", "get", tmp_path / "stderr.log", REPLY_TIMEOUT))
    assert isinstance(outcome, TaskSnapshot)
    assert outcome.status == "working" and outcome.poll_interval_ms == 500


def test_classify_table() -> None:
    from mcp.shared.exceptions import MCPError

    def cls(code: int, method: str) -> str:
        return classify(MCPError(code, "x"), method).failure_class

    assert cls(-32000, "tasks/get") == "transient"
    assert cls(-32001, "tools/call") == "transient"
    assert cls(-32601, "tools/call") == "permanent"
    assert cls(-32601, "tasks/get") == "incompatible"
    assert cls(-32602, "tools/call") == "permanent"
    for method in ("tasks/get", "tasks/result", "tasks/cancel", "tasks/update"):
        assert cls(-32602, method) == "lost"
    assert cls(-32021, "tasks/get") == "incompatible"
    assert classify(TimeoutError(), "tasks/get").failure_class == "transient"
    assert classify(ValueError(), "tasks/get").failure_class == "protocol_violation"


# --- hypothesis: arbitrary tasks/get replies ------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
BASE_2025 = {
    "taskId": "t1",
    "status": "working",
    "createdAt": "2026-01-01T00:00:00Z",
    "lastUpdatedAt": "2026-01-01T00:00:01Z",
    "ttl": 1000,
    "pollInterval": 100,
}
BASE_2026 = {
    **{k: v for k, v in BASE_2025.items() if k not in ("ttl", "pollInterval")},
    "ttlMs": 1000,
    "pollIntervalMs": 100,
    "resultType": "complete",
}
STATUS = st.sampled_from(["working", "input_required", "completed", "failed", "cancelled"])


def mutated(base: dict[str, Any], extra_keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    keys = sorted(set(base) | set(extra_keys))
    change = st.dictionaries(st.sampled_from(keys), JSON | STATUS, max_size=3)
    drop = st.sets(st.sampled_from(keys), max_size=2)

    def build(ch: dict[str, Any], dr: set[str]) -> dict[str, Any]:
        out = {**base, **ch}
        for key in dr:
            out.pop(key, None)
        return out

    return st.builds(build, change, drop)


async def _get_through(reply: dict[str, Any], generation: str) -> TaskSnapshot | TaskError:
    def responder(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        return reply if method == "tasks/get" else None

    async with scripted_transport(responder, generation) as streams:

        class _Transport:
            async def __aenter__(self) -> Any:
                return streams

            async def __aexit__(self, *exc: object) -> None:
                return None

        mode: Mode = "auto" if generation == "2026" else "legacy"
        # The peer always answers: a timeout here would be load, not the reply's fault.
        async with TaskClient(
            TransportServer(_Transport()), mode=mode, read_timeout=REPLY_TIMEOUT
        ) as tc:
            assert tc.generation == ("2026-07-28" if generation == "2026" else "2025-11-25")
            try:
                with anyio.fail_after(REPLY_TIMEOUT * 2):
                    return await tc.get("t1")
            except TaskError as exc:
                return exc


def _check(outcome: TaskSnapshot | TaskError) -> None:
    if isinstance(outcome, TaskError):
        # The peer always answers promptly, so the only admissible failure is a violation.
        assert outcome.failure_class == "protocol_violation", outcome
        return
    assert outcome.task_id == "t1"
    assert outcome.status in ("working", "input_required", "completed", "failed", "cancelled")
    assert outcome.created_at.tzinfo is not None and outcome.updated_at.tzinfo is not None
    assert outcome.ttl_ms is None or outcome.ttl_ms >= 0
    assert outcome.poll_interval_ms is None or outcome.poll_interval_ms >= 0
    if outcome.status == "completed" and outcome.generation == "2026-07-28":
        assert outcome.result is not None


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(mutated(BASE_2025, ["statusMessage"]))
def test_fuzzed_get_2025(reply: dict[str, Any]) -> None:
    _check(run(lambda: _get_through(reply, "2025")))


@FAST
@given(mutated(BASE_2026, ["statusMessage", "result", "error", "inputRequests"]))
def test_fuzzed_get_2026(reply: dict[str, Any]) -> None:
    _check(run(lambda: _get_through(reply, "2026")))
