"""The next safe decision for a receipt (seed 003's observe → decide → act loop).

``next_safe_decision(receipt, now)`` never guesses: it says who must act (the agent, the
user, or chit itself), what the safe action is, why (a sentence the CLI/TUI shows as is),
and, when chit should look again, when. The full table is in ``docs/receipt-states.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from chit.receipts.models import Receipt
from chit.receipts.policy import MAX_RETRIEVAL_FAILURES
from chit.receipts.queries import freshness, is_success
from chit.receipts.states import (
    AcceptanceState,
    CancelPosture,
    FailureClass,
    InputKind,
    LifecycleState,
    RetrievalCondition,
    TaskProtocol,
)

__all__ = ["Action", "Actor", "Decision", "follow_done", "needs_user", "next_safe_decision"]


class Actor(StrEnum):
    """Who must act next."""

    AGENT = "agent"
    USER = "user"
    CHIT = "chit"


class Action(StrEnum):
    """The next safe action."""

    WAIT = "wait"  # nothing to do until check_at; independent work may continue
    CHECK = "check"  # chit checks the task's status now
    RECONNECT = "reconnect"  # server unreachable: chit retries with backoff at check_at
    ANSWER_INPUT = "answer_input"  # a person answers the exact request; nobody guesses
    CONFIRM_CANCEL = "confirm_cancel"  # cancel asked for, terminal state not yet seen
    RETRIEVE_RESULT = "retrieve_result"  # terminal: fetch the result/error once
    EVALUATE = "evaluate"  # run the acceptance check before anyone assumes success
    RESOLVE_ERROR = "resolve_error"  # finished, outcome unresolved: recover, narrow or ask
    RECOVER = "recover"  # record the last known state, bounded recovery, no blind replay
    STOP = "stop"  # cancelled as asked: nothing more to do
    PROCEED = "proceed"  # done: dependent work may continue


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do next, who does it, why, and (for chit) when to look again."""

    action: Action
    actor: Actor
    reason: str
    check_at: datetime | None = None


_RECOVERY_HINTS = {
    FailureClass.TRANSIENT: "a deliberate, new attempt may succeed",
    FailureClass.PERMANENT: "change the request before trying again",
    FailureClass.LOST: "verify whether the effect happened before any new call",
    FailureClass.INCOMPATIBLE: "use a compatible server or client version",
    FailureClass.PROTOCOL_VIOLATION: "the server broke the protocol; report it, trust nothing",
}


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _ago(now: datetime, at: datetime) -> str:
    seconds = max(0, int((now - at) / timedelta(seconds=1)))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def _sentence(text: str | None) -> str:
    """A server's message closed as one sentence of ours, without doubled punctuation.

    Servers end prompts any way they like ("Please clarify what you're looking for:"); a
    full stop appended blindly printed "looking for:." (a trailing ``:``, ``;``, ``,`` or
    dash stands for what follows, which here is our next sentence, so it is dropped).
    """
    body = (text or "").strip()
    if not body:
        return "(no message)."
    if body[-1] in ".!?\u2026":
        return body
    return (body.rstrip(":;,-\u2013\u2014 ") or "(no message)") + "."


def _last_known(r: Receipt, now: datetime) -> str:
    return f"last known state {r.state}, observed {_ago(now, r.status_at)}"


def next_safe_decision(receipt: Receipt, now: datetime) -> Decision:
    """Return the next safe decision for ``receipt`` at ``now``.

    Args:
        receipt: the receipt.
        now: the current time (timezone-aware).

    Returns:
        A ``Decision``; ``check_at`` is set when chit should check the task again.
    """
    r = receipt
    acceptance = r.acceptance
    if acceptance.state is AcceptanceState.ACCEPTED:
        by = f" by {acceptance.decided_by}" if acceptance.decided_by else ""
        return Decision(Action.PROCEED, Actor.AGENT, f"accepted{by}: dependent work may proceed")
    if acceptance.state is AcceptanceState.REJECTED:
        why = f": {acceptance.why}" if acceptance.why else ""
        return Decision(
            Action.RECOVER,
            Actor.AGENT,
            f"result rejected{why}. Decide recovery: change the request, narrow it, or stop; "
            "do not replay it unchanged",
        )
    if r.is_terminal:
        return _terminal(r, now)
    return _live(r, now)


def needs_user(receipt: Receipt, now: datetime) -> bool:
    """True when the next safe decision belongs to a person (the TUI's attention list)."""
    return next_safe_decision(receipt, now).actor is Actor.USER


def follow_done(r: Receipt, now: datetime) -> bool:
    """True when following a receipt (``chit call --wait``, ``chit follow``) should stop.

    It ended (and its result is in, or will never come), is lost, or waits for a person
    (input, or a decision after many failed checks): chit cannot move it on alone.
    """
    if r.retrieval in (
        RetrievalCondition.VANISHED,
        RetrievalCondition.EXPIRED,
        RetrievalCondition.INCOMPATIBLE,
    ):
        return True
    if r.is_terminal and (
        r.outcome is not None or r.next_check_at is None or r.state is LifecycleState.CANCELLED
    ):
        return True
    return bool(r.pending_inputs) or needs_user(r, now)


def _lost_or_unreadable(r: Receipt, now: datetime) -> Decision | None:
    condition = r.retrieval
    if condition is RetrievalCondition.INCOMPATIBLE:
        return Decision(
            Action.RECOVER,
            Actor.USER,
            f"chit cannot read this server's task replies ({r.retrieval_error}); "
            f"{_last_known(r, now)}. Use a compatible version; do not replay the call",
        )
    if condition.is_lost:
        what = (
            "vanished before its TTL ran out"
            if condition is RetrievalCondition.VANISHED
            else ("expired (its TTL ran out)")
        )
        if condition is RetrievalCondition.VANISHED and r.retrieval_error:
            what += f" ({r.retrieval_error})"
        return Decision(
            Action.RECOVER,
            Actor.USER,
            f"the task {what}; {_last_known(r, now)}. Its effect is unknown: verify it "
            "before any new call, never replay blindly",
        )
    if condition is RetrievalCondition.UNREACHABLE:
        if r.retrieval_failures >= MAX_RETRIEVAL_FAILURES:
            return Decision(
                Action.RECOVER,
                Actor.USER,
                f"server unreachable for {r.retrieval_failures} checks ({r.retrieval_error}); "
                f"{_last_known(r, now)}. Decide: keep waiting, fix the server, or give up",
            )
        return Decision(
            Action.RECONNECT,
            Actor.CHIT,
            f"server unreachable ({r.retrieval_error}); {_last_known(r, now)}; "
            "retrying with backoff",
            r.next_check_at or now,
        )
    return None


def _terminal(r: Receipt, now: datetime) -> Decision:
    outcome = r.outcome
    despite = r.cancel.completed_despite_cancel
    sync = " (answered synchronously)" if r.synchronous else ""
    if outcome is None and r.state is not LifecycleState.CANCELLED:
        blocked = _lost_or_unreadable(r, now)
        if blocked is not None:
            return blocked
        what = "result" if r.state is LifecycleState.COMPLETED else "error"
        return Decision(
            Action.RETRIEVE_RESULT,
            Actor.CHIT,
            f"{r.state}: retrieve the {what} once before anyone relies on it",
            r.next_check_at or now,
        )
    if outcome is not None and outcome.is_error and outcome.error_code is None:
        # A tool-level error: 2026 reports it as completed+isError, 2025-11-25 as failed.
        legacy = (
            " (2025-11-25 reports a tool error as failed)"
            if (r.protocol is TaskProtocol.LEGACY and r.state is LifecycleState.FAILED)
            else ""
        )
        return Decision(
            Action.RESOLVE_ERROR,
            Actor.AGENT,
            f"{r.state} with an error result{sync}{legacy}: the lifecycle is finished but the "
            f"outcome is unresolved ({outcome.summary or 'no summary'}). Recover, narrow the "
            "scope, or ask the user",
        )
    if is_success(r):
        if r.acceptance.state is AcceptanceState.NOT_REQUIRED:
            return Decision(
                Action.PROCEED, Actor.AGENT, f"completed{sync}; no acceptance check required"
            )
        check = r.acceptance.check
        against = f"against the check '{check}'" if check else "(no acceptance check recorded)"
        if despite:
            return Decision(
                Action.EVALUATE,
                Actor.USER,
                "the work completed although a cancel was requested: its effect happened. "
                f"Review the result {against} before proceeding",
            )
        return Decision(
            Action.EVALUATE,
            Actor.AGENT,
            f"completed{sync}: evaluate the result {against} before dependent work assumes success",
        )
    if r.state is LifecycleState.CANCELLED:
        if r.cancel.posture is CancelPosture.OBSERVED:
            return Decision(
                Action.STOP,
                Actor.AGENT,
                "cancelled as requested (observed): dependent work must not assume its effect",
            )
        return Decision(
            Action.RECOVER,
            Actor.AGENT,
            f"cancelled without our request ({r.status_message or 'no reason given'}): decide "
            "whether the work is still needed; do not replay it blindly",
        )
    # failed (or completed with a JSON-RPC error): record it and recover within bounds.
    assert outcome is not None  # cancelled and outcome-less cases returned above
    failure = outcome.failure_class or FailureClass.PERMANENT
    cancelled = " after a cancel request" if r.cancel.posture is CancelPosture.OBSERVED else ""
    detail = outcome.error_message or outcome.summary or "no message"
    return Decision(
        Action.RECOVER,
        Actor.AGENT,
        f"{r.state}{cancelled}{sync} ({failure}: {detail}). Bounded recovery: "
        f"{_RECOVERY_HINTS[failure]}; never replay blindly",
    )


def _live(r: Receipt, now: datetime) -> Decision:
    blocked = _lost_or_unreadable(r, now)
    if blocked is not None:
        return blocked
    if r.cancel.posture in (CancelPosture.REQUESTED, CancelPosture.ACKNOWLEDGED):
        acked = (
            f", acknowledged {_ago(now, r.cancel.acknowledged_at)}"
            if r.cancel.acknowledged_at
            else ""
        )
        requested = _ago(now, r.cancel.requested_at) if r.cancel.requested_at else "earlier"
        return Decision(
            Action.CONFIRM_CANCEL,
            Actor.CHIT,
            f"cancel requested {requested}{acked}, not yet observed: the task is still "
            f"{r.state} and may yet complete",
            r.next_check_at or now,
        )
    pending = r.pending_inputs
    if pending:
        first = pending[0]
        what = f"open {first.url}" if first.kind is InputKind.URL and first.url else first.kind
        more = f" (+{len(pending) - 1} more)" if len(pending) > 1 else ""
        return Decision(
            Action.ANSWER_INPUT,
            Actor.USER,
            f"the task needs input{more}: [{what}] {_sentence(first.message)} "
            "Answer, decline or cancel; chit will not guess",
        )
    if r.state is LifecycleState.INPUT_REQUIRED:
        answered = any(q.answered_at is not None for q in r.input_requests)
        if answered:
            return Decision(
                Action.WAIT,
                Actor.CHIT,
                "answer sent; waiting for the server to continue",
                r.next_check_at or now,
            )
        return Decision(
            Action.CHECK,
            Actor.CHIT,
            "input required, but the request itself has not arrived yet: fetch it",
            now,
        )
    if freshness(r, now) is RetrievalCondition.STALE:
        return Decision(
            Action.CHECK,
            Actor.CHIT,
            f"{r.state}, last observed {_ago(now, r.status_at)} (stale): check now",
            now,
        )
    if r.expires_at is not None and now >= r.expires_at:
        return Decision(
            Action.CHECK,
            Actor.CHIT,
            f"its TTL ran out at {_when(r.expires_at)}: check whether the task still exists",
            now,
        )
    if r.outcome is not None:
        return Decision(
            Action.CHECK, Actor.CHIT, "a result arrived before the final status: check now", now
        )
    check_at = r.next_check_at or now
    message = f" ({r.status_message})" if r.status_message else ""
    return Decision(
        Action.WAIT,
        Actor.CHIT,
        f"{r.state}{message}: wait; next check at {_when(check_at)}. Independent work may "
        "continue; nothing may assume the result",
        check_at,
    )
