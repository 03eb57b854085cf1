"""Questions outside a task whose holder is gone: end their receipts honestly.

A server's question outside a task (:mod:`chit.proxy.asks`) waits in the process that
holds the server's session — the daemon. When that process stops, the server's request
and the host's call are gone with the session: nobody can answer the question any more.
Its receipt would stay ``input_required`` until someone tried to answer and was refused.
So when a daemon starts, every such receipt whose holder process is gone is ended:
the pending questions are marked ``lost`` and the receipt ``failed``, with a status
message that says what happened and what to do next (the call's effect is unknown).
"""

from __future__ import annotations

import logging

from chit import clock
from chit.proxy.asks import NOT_TASK, UNPROMPTED
from chit.receipts import (
    AnswerStatus,
    Event,
    HostLeft,
    InputAnswered,
    LifecycleState,
    ObservationSource,
    Receipt,
    StatusObserved,
    TaskProtocol,
)
from chit.runtime import Supervisor, owners

log = logging.getLogger("chit.proxy")

HELD_REASONS = (NOT_TASK, UNPROMPTED)
"""``not_task_reason`` of the receipts chit proxy opens for a server's question."""


def _ended_why(receipt: Receipt) -> str:
    """The status message of a question's receipt whose holder stopped (the next step)."""
    if receipt.not_task_reason == UNPROMPTED:
        return (
            "chit stopped while the server's question waited: the question can no longer be"
            " answered (the server's session ended with chit); the server asks again on a"
            " new session if it still needs an answer"
        )
    return (
        "chit stopped while the server's question waited: the question can no longer be"
        " answered and the call ended with chit's session of the server; its effect is"
        " unknown — check the server before calling the tool again"
    )


def end_orphans(sup: Supervisor) -> int:
    """End the held-question receipts of processes that are gone; how many were ended.

    Called once when a daemon starts (before any proxy attaches). A receipt whose
    holder is another live process (a ``chit proxy --no-daemon`` beside the daemon) is
    left to it.
    """
    ended = 0
    for receipt in sup.store.receipts.non_terminal():
        if receipt.protocol is not TaskProtocol.SYNC or receipt.not_task_reason not in HELD_REASONS:
            continue
        owner = sup.store.intents.owner_of(receipt.request_key)
        age = (clock.now() - receipt.status_at).total_seconds()
        remote = sup.pool.options.result_timeout
        if not owners.owner_gone(owner, mine="", age_s=age, remote_wait_s=remote):
            continue
        events: list[Event] = [
            InputAnswered(key=q.key, status=AnswerStatus.LOST) for q in receipt.pending_inputs
        ]
        if receipt.host is not None and receipt.host.left_at is None:
            events.append(HostLeft(why="chit stopped (its daemon ended) while the call waited"))
        events.append(
            StatusObserved(
                status=LifecycleState.FAILED,
                source=ObservationSource.RESTART,
                message=_ended_why(receipt),
            )
        )
        try:
            sup.writer.apply(receipt.receipt_id, events)
            ended += 1
        except Exception:
            log.exception("the lost question of receipt %s was not recorded", receipt.receipt_id)
    if ended:
        log.info("%d question(s) outside a task ended: their holder stopped", ended)
    return ended


__all__ = ["HELD_REASONS", "end_orphans"]
