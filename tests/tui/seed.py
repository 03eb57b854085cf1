"""A deterministic home for the TUI tests: work records and receipts in every state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from chit.home import Home
from chit.receipts import (
    Acceptance,
    CancelInfo,
    CancelPosture,
    FailureClass,
    InputKind,
    InputRequest,
    LifecycleState,
    Observation,
    ObservationKind,
    ObservationSource,
    Outcome,
    Receipt,
    RetrievalCondition,
    TaskProtocol,
)
from chit.store import Store

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
"""The frozen "now" of every TUI test."""

FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "title": "E-mail", "format": "email"},
        "copies": {"type": "integer", "title": "Copies", "minimum": 1, "maximum": 5, "default": 1},
        "urgent": {"type": "boolean", "title": "Urgent", "default": False},
        "region": {
            "type": "string",
            "title": "Region",
            "oneOf": [
                {"const": "eu", "title": "Europe"},
                {"const": "us", "title": "United States"},
            ],
        },
        "formats": {
            "type": "array",
            "title": "Formats",
            "items": {
                "anyOf": [{"const": "pdf", "title": "PDF"}, {"const": "csv", "title": "CSV"}]
            },
        },
    },
    "required": ["email", "region"],
}


def rid(n: int) -> str:
    """A fixed 26-character receipt id."""
    return f"01JNQ000000000000000000{n:03d}"


def _receipt(n: int, **fields: Any) -> Receipt:
    base: dict[str, Any] = {
        "receipt_id": rid(n),
        "server": "demo",
        "tool": "slow_compute",
        "purpose": "compute things",
        "args_digest": "sha256:abc",
        "request_key": f"rk-{n}",
        "protocol": TaskProtocol.EXTENSION,
        "accepted_at": NOW - timedelta(minutes=3),
        "status_at": NOW - timedelta(seconds=12),
        "state": LifecycleState.WORKING,
        "poll_interval_ms": 5000,
    }
    base.update(fields)
    return Receipt(**base)


def _obs(
    r: Receipt,
    ago_s: int,
    kind: ObservationKind,
    status: LifecycleState | None,
    msg: str | None = None,
    source: ObservationSource = ObservationSource.POLL,
) -> Observation:
    return Observation(
        receipt_id=r.receipt_id,
        at=NOW - timedelta(seconds=ago_s),
        source=source,
        kind=kind,
        status=status,
        message=msg,
    )


def receipts() -> list[Receipt]:
    """The seeded receipts, one per interesting situation."""

    def ago(s: float) -> datetime:
        return NOW - timedelta(seconds=s)

    return [
        _receipt(
            1,
            work_ref="W-report",
            purpose="crunch Q1 numbers",
            status_at=ago(12),
            stale_after=ago(-30),
            expires_at=ago(-250),
            ttl_ms=600000,
            next_check_at=ago(-3),
        ),
        _receipt(
            2,
            work_ref="W-report",
            tool="multi_input",
            purpose="ask where to send it",
            state=LifecycleState.INPUT_REQUIRED,
            status_at=ago(40),
            stale_after=ago(-20),
            input_requests=(
                InputRequest(
                    key="q1",
                    message="Where should the report go?",
                    requested_schema=FORM_SCHEMA,
                    received_at=ago(40),
                ),
            ),
        ),
        _receipt(
            3,
            work_ref="W-report",
            tool="greet",
            purpose="say hello",
            state=LifecycleState.COMPLETED,
            status_at=ago(90),
            outcome=Outcome(
                summary="Hello, Ada!", result_digest="sha256:def", retrieved_at=ago(90)
            ),
            acceptance=Acceptance(check="not isError"),
        ),
        _receipt(
            4,
            work_ref="W-cleanup",
            tool="failing_job",
            purpose="delete old branches",
            state=LifecycleState.FAILED,
            status_at=ago(200),
            status_message="disk quota exceeded",
            outcome=Outcome(
                is_error=True,
                error_code=-32603,
                error_message="disk quota exceeded",
                failure_class=FailureClass.PERMANENT,
                retrieved_at=ago(200),
            ),
        ),
        _receipt(
            5,
            tool="slow_compute",
            purpose="long simulation",
            state=LifecycleState.CANCELLED,
            status_at=ago(300),
            cancel=CancelInfo(
                posture=CancelPosture.OBSERVED,
                requested_at=ago(330),
                acknowledged_at=ago(329),
                observed_at=ago(300),
                observed_state=LifecycleState.CANCELLED,
            ),
        ),
        _receipt(
            6,
            server="reports",
            tool="build_index",
            purpose="index the archive",
            status_at=ago(400),
            stale_after=ago(300),
            retrieval=RetrievalCondition.FRESH,
        ),
        _receipt(
            7,
            tool="confirm_delete",
            purpose="open the consent page",
            state=LifecycleState.INPUT_REQUIRED,
            status_at=ago(500),
            input_requests=(
                InputRequest(
                    key="u1",
                    kind=InputKind.URL,
                    message="Approve on the web",
                    url="https://example.com/approve/42",
                    received_at=ago(500),
                ),
            ),
        ),
    ]


def seed(root: Path, *, with_data: bool = True) -> Home:
    """Create a home under ``root`` with the seeded records (or empty)."""
    home = Home(root).ensure()
    with Store.open(home) as store:
        if not with_data:
            return home
        store.work.create("W-report", "Quarterly report", purpose="Q1 numbers for the board")
        store.work.add_note("W-report", "numbers are in; waiting for the recipient")
        store.work.create("W-cleanup", "Clean old branches")
        store.work.complete("W-cleanup", "partially done")
        for r in receipts():
            obs = [
                _obs(
                    r,
                    int((NOW - r.accepted_at).total_seconds()),
                    ObservationKind.STATUS,
                    LifecycleState.WORKING,
                    "task created",
                    ObservationSource.CREATE,
                )
            ]
            obs.append(
                _obs(
                    r,
                    int((NOW - r.status_at).total_seconds()),
                    ObservationKind.STATUS,
                    r.state,
                    r.status_message,
                )
            )
            store.receipts.insert(r, None, None, obs)
            if r.receipt_id == rid(1):
                store.observations.append(*_polls(r))
    return home


def _polls(r: Receipt) -> list[Observation]:
    """240 polls that all said "step 1 of 100" (the timeline folds them into one row)."""
    polls = []
    for n in range(240):
        obs = _obs(r, 250 - n, ObservationKind.STATUS, LifecycleState.WORKING, "step 1 of 100")
        changes = ("status_message",) if n == 0 else ("status_at",)
        polls.append(obs.model_copy(update={"changes": changes}))
    return polls


APPROVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve", "default": False},
        "note": {"type": "string", "title": "Note", "maxLength": 40},
    },
    "required": ["approve"],
}
"""The schema of the seeded agent question (``work_ask``)."""


def seed_question(
    home: Home,
    *,
    schema: dict[str, Any] | None = APPROVE_SCHEMA,
    decision_id: str = "dq_seeded",
    asked: timedelta = timedelta(minutes=2),
) -> str:
    """Park a ``work_ask`` question about W-report in the sidecar store, ``asked`` ago."""
    from chit import clock
    from chit.sidecar.db import open_sidecar_db
    from chit.sidecar.decisions import ask

    db = open_sidecar_db(home.sidecar_db_path)
    clock.freeze(NOW - asked)
    try:
        question = "Send the Q1 report to the board now?"
        return ask(db, "agent", "W-report", question, schema, decision_id=decision_id).id
    finally:
        clock.freeze(NOW)
        db.close()


def seed_many(home: Home, count: int) -> list[str]:
    """``count`` working receipts without a work record, one minute apart (ids returned)."""
    ids: list[str] = []
    with Store.open(home) as store:
        for n in range(100, 100 + count):
            r = _receipt(
                n,
                purpose=f"batch job {n}",
                accepted_at=NOW - timedelta(minutes=200 - n),
                status_at=NOW - timedelta(seconds=5),
            )
            store.receipts.insert(r, None, None, [])
            ids.append(r.receipt_id)
    return ids
