"""Event → receipt transitions: ``apply(receipt, event, now) -> Transition``.

The rules (see ``docs/receipt-states.md``):

* The lifecycle state is only ever the server's. Terminal states never change: a later
  different status is recorded as an ``out_of_order`` observation with ``applied=False``
  and the receipt unchanged. A repeated *identical* terminal status only refreshes the
  bookkeeping (``status_at``, retrieval condition). A status whose ``server_updated_at`` is
  older than the recorded one is out of order too (a late notification).
* The transition records what the server says, per protocol: 2025-11-25 puts an
  ``isError`` tool result in ``failed``, the 2026 extension in ``completed`` with
  ``isError``. Both are "unresolved" (``queries.is_success`` is False for both).
* Retrieval problems (unreachable, vanished, expired, incompatible) never touch ``state``.
* Cancellation: requested → acknowledged → observed (with the terminal state seen, which
  may be ``completed``); on a terminal task it is ``unnecessary``.
* Input requests are deduplicated by key; a request that is no longer pending is never
  made pending again; pending requests become ``lost`` when the task leaves
  ``input_required``, ends, is withdrawn from the server's snapshot, or is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, TypeAdapter
from pydantic.fields import FieldInfo

from chit.receipts.events import (
    AcceptanceDecided,
    CancelAcknowledged,
    CancelRequested,
    CancelUnsupported,
    Event,
    HostLeft,
    InputAnswered,
    InputRequested,
    ResultObserved,
    RetrievalFailed,
    RetrievalOk,
    StatusObserved,
)
from chit.receipts.models import (
    Observation,
    Receipt,
    bound_text,
)

__all__ = ["Transition", "apply", "status_update"]

from chit.receipts._rules import Step, result_rule, status_rule, status_update
from chit.receipts._side_rules import (
    acceptance_rule,
    cancel_acknowledged_rule,
    cancel_requested_rule,
    cancel_unsupported_rule,
    host_left_rule,
    input_answered_rule,
    input_requested_rule,
    retrieval_failed_rule,
    retrieval_ok_rule,
)

__all__ = ["Transition", "apply", "status_update"]


@dataclass(frozen=True, slots=True)
class Transition:
    """The result of applying one event: the new receipt, what changed, the timeline row."""

    receipt: Receipt
    changes: tuple[str, ...]
    observation: Observation

    @property
    def applied(self) -> bool:
        """True when the event changed the receipt."""
        return self.observation.applied


def apply(receipt: Receipt, event: Event, now: datetime) -> Transition:
    """Apply ``event`` observed at ``now`` to ``receipt``.

    Args:
        receipt: the current receipt (not modified: models are frozen).
        event: what was observed or decided.
        now: the time of the observation (timezone-aware).

    Returns:
        A ``Transition``; when nothing changed, ``transition.receipt is receipt`` and the
        observation has ``applied=False`` (it still belongs in the timeline).

    Raises:
        ValueError: if ``now`` is naive or the event is malformed (e.g. a retrieval
            failure with condition ``fresh``, an answer with status ``pending``).
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    step = _dispatch(receipt, event, now)
    changes: tuple[str, ...] = ()
    new = receipt
    if not step.rejected:
        changes = _changed(receipt, step.receipt)
        if changes:
            new = _revalidated(step.receipt, changes, receipt.version + 1)
    observation = Observation(
        receipt_id=receipt.receipt_id,
        at=now,
        source=event.source,
        kind=step.kind,
        status=step.status,
        message=bound_text(step.message),
        applied=bool(changes),
        changes=changes,
    )
    return Transition(receipt=new, changes=changes, observation=observation)


_FIELDS = tuple(name for name in Receipt.model_fields if name != "version")


def _adapter(info: FieldInfo) -> TypeAdapter[Any]:
    # The field's type with its constraints (ge=0, the message bound): what the model
    # itself validates the field with.
    annotation: Any = info.annotation
    if info.metadata:
        annotation = Annotated[(annotation, *info.metadata)]
    return TypeAdapter(annotation)


_ADAPTERS = {name: _adapter(info) for name, info in Receipt.model_fields.items()}
_AWARE = frozenset(
    name
    for name, info in Receipt.model_fields.items()
    if info.annotation in (AwareDatetime, AwareDatetime | None) and not info.metadata
)
"""The fields typed ``AwareDatetime`` (or optional), with no constraint of their own."""


def _changed(before: Receipt, after: Receipt) -> tuple[str, ...]:
    """The fields whose values differ (``version`` aside), in declaration order."""
    old, new = before.__dict__, after.__dict__
    # model_copy(update=...) shares every untouched value: identity settles most fields
    # without running pydantic's (slow) equality on nested models.
    return tuple(name for name in _FIELDS if old[name] is not new[name] and old[name] != new[name])


def _revalidated(receipt: Receipt, changes: tuple[str, ...], version: int) -> Receipt:
    """``receipt`` at ``version``, with every changed field validated again.

    ``model_copy(update=...)`` skips validation and the store must only ever see a valid
    receipt (aware datetimes, bounded texts, well-formed nested models). The receipt has
    no cross-field validators, so validating the changed fields - round-tripped through
    their JSON-able form, as a whole-model re-validation would - is the same check
    without re-validating (and re-serialising) the fields that did not change.
    """
    data = receipt.__dict__
    update: dict[str, Any] = {"version": version}
    for name in changes:
        value = data[name]
        if name in _AWARE and type(value) is datetime and value.tzinfo is not None:
            # All an ``AwareDatetime`` asks of a datetime: the adapter would hand back an
            # equal one. Every check moves three of them (status_at, next_check_at,
            # stale_after); the round trip was a quarter of the fold.
            update[name] = value
            continue
        adapter = _ADAPTERS[name]
        update[name] = adapter.validate_python(adapter.dump_python(value))
    return receipt.model_copy(update=update)


def _dispatch(r: Receipt, event: Event, now: datetime) -> Step:
    match event:
        case StatusObserved():
            return status_rule(r, event, now)
        case ResultObserved():
            return result_rule(r, event, now)
        case CancelRequested():
            return cancel_requested_rule(r, now)
        case CancelAcknowledged():
            return cancel_acknowledged_rule(r, event, now)
        case CancelUnsupported():
            return cancel_unsupported_rule(r, event)
        case RetrievalFailed():
            return retrieval_failed_rule(r, event, now)
        case RetrievalOk():
            return retrieval_ok_rule(r)
        case InputRequested():
            return input_requested_rule(r, event, now)
        case InputAnswered():
            return input_answered_rule(r, event, now)
        case AcceptanceDecided():
            return acceptance_rule(r, event, now)
        case HostLeft():
            return host_left_rule(r, event, now)
    raise TypeError(f"unknown event {event!r}")  # pragma: no cover - exhaustive match
