"""2025-11-25 input: keep a ``tasks/result`` open, park its prompts in the durable inbox.

In 2025 a prompt exists only while a ``tasks/result`` request is open: the server sends
``elicitation/create`` (or ``sampling/createMessage``, ``roots/list``: forms made by
:mod:`chit.reconcile.questions`) on it. The watcher opens one per ``input_required`` task, records
each elicitation as a pending input request on the receipt (the durable inbox), and
holds the callback until the user answers — for at most ``answer_wait_s``, after which
the request is closed and re-opened on a later check (never a hang). After a restart a
pending request is expected to be re-delivered on the new ``tasks/result``; when it is
not within ``redeliver_wait_s`` it is marked lost ("prompt lost").

A sampling request's params are kept in memory, as the server sent them, exactly while
its request is open (:meth:`LegacyInbox.server_request`): ``chit proxy`` forwards them
to its host (redacted on the way out); the receipt stores only the bounded, redacted
transcript a person reads.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp_types import INTERNAL_ERROR, ElicitResult, ErrorData, InputRequest, InputResponse

from chit.clock import Clock, current_clock
from chit.receipts import (
    AnswerStatus,
    Event,
    InputAnswered,
    InputRequested,
    LifecycleState,
    Receipt,
)
from chit.reconcile import questions
from chit.reconcile.connections import ConnectionPool
from chit.reconcile.outcomes import (
    acceptance_event,
    legacy_input_key,
    outcome_event,
    result_json,
    seen_request,
)
from chit.reconcile.writer import ReceiptWriter
from chit.tasks.client import TaskError
from chit.tasks.client.models import TaskOutcome

log = logging.getLogger("chit.reconcile")


def answer_status(reply: ElicitResult) -> AnswerStatus:
    """The inbox status an elicitation reply records."""
    if reply.action == "accept":
        return AnswerStatus.ANSWERED
    return AnswerStatus.DECLINED if reply.action == "decline" else AnswerStatus.CANCELLED


@dataclass
class Watch:
    """One open ``tasks/result`` of a receipt; ``ended`` is set when it closes.

    ``error`` says why it closed when the server (or the connection) ended it — a task
    the server no longer knows (``lost``), an unreachable server (``transient``) — and is
    None when it closed normally (the result arrived, or chit closed it).
    """

    scope: anyio.CancelScope
    expected: set[str] = field(default_factory=set)
    delivered: set[str] = field(default_factory=set)
    first_input: anyio.Event = field(default_factory=anyio.Event)
    ended: anyio.Event = field(default_factory=anyio.Event)
    error: TaskError | None = None


class LegacyInbox:
    """Watchers of 2025 ``tasks/result`` streams and the answers waiting for them."""

    def __init__(
        self,
        writer: ReceiptWriter,
        pool: ConnectionPool,
        tg: TaskGroup,
        *,
        answer_wait_s: float = 300.0,
        redeliver_wait_s: float = 10.0,
        digest_key: bytes | None = None,
        clock: Clock | None = None,
    ) -> None:
        """Create the inbox; watchers run in ``tg``; results are digested with ``digest_key``.

        The waits for a person's answer and for a re-delivered prompt run on ``clock``.
        """
        self._writer = writer
        self.clock = clock or current_clock()
        self._pool = pool
        self._tg = tg
        self.answer_wait_s = answer_wait_s
        self.redeliver_wait_s = redeliver_wait_s
        self.digest_key = digest_key
        self._watches: dict[str, Watch] = {}
        self._answers: dict[tuple[str, str], ElicitResult] = {}
        self._waiters: dict[tuple[str, str], anyio.Event] = {}
        self._sampling: dict[tuple[str, str], dict[str, Any]] = {}

    def watching(self, receipt_id: str) -> bool:
        """True while a ``tasks/result`` is open for the receipt."""
        return receipt_id in self._watches

    def watch(self, receipt_id: str) -> Watch | None:
        """The receipt's open ``tasks/result`` (None when none is open)."""
        return self._watches.get(receipt_id)

    def has_waiter(self, receipt_id: str, key: str) -> bool:
        """True when a delivered prompt is waiting for this answer right now."""
        return (receipt_id, key) in self._waiters

    def server_request(self, receipt_id: str, key: str) -> dict[str, Any] | None:
        """The params of the open sampling request ``key`` as the server sent them.

        None once its request closed (answered, declined, the bounded wait ended, its
        ``tasks/result`` ended with the task: a re-delivery keeps it again), for another
        kind, or one too large to keep (:func:`questions.sampling_params`). Raw: the
        caller redacts.
        """
        return self._sampling.get((receipt_id, key))

    @property
    def kept_requests(self) -> int:
        """How many sampling requests' params are kept now (one per open request)."""
        return len(self._sampling)

    def deliver(self, receipt_id: str, key: str, reply: ElicitResult) -> None:
        """Queue the user's answer; a waiting prompt (or a re-delivered one) takes it."""
        self._answers[(receipt_id, key)] = reply
        event = self._waiters.get((receipt_id, key))
        if event is not None:
            event.set()

    def ensure_watch(self, receipt: Receipt, task_id: str) -> None:
        """Open a ``tasks/result`` for ``receipt`` unless one is already open."""
        if receipt.receipt_id in self._watches or receipt.is_terminal:
            return
        expected = {q.key for q in receipt.pending_inputs}
        watch = Watch(scope=anyio.CancelScope(), expected=expected)
        self._watches[receipt.receipt_id] = watch
        self._tg.start_soon(
            self._watch, receipt.receipt_id, receipt.server, task_id, watch, expected
        )

    async def settle(self, timeout: float) -> None:
        """Wait (bounded) until every open watcher has received its first prompt."""
        with self.clock.move_on_after(timeout):
            for watch in list(self._watches.values()):
                await watch.first_input.wait()

    def close(self) -> None:
        """Cancel every open watcher (their prompts stay pending in the inbox)."""
        for watch in self._watches.values():
            watch.scope.cancel()

    async def _watch(
        self, rid: str, server: str, task_id: str, watch: Watch, expected: set[str]
    ) -> None:
        try:
            with watch.scope:
                client = await self._pool.get(server)
                if expected:
                    self._tg.start_soon(self._expect_redelivery, rid, watch, expected)

                async def handler(
                    _task: str | None, request: InputRequest
                ) -> InputResponse | ErrorData:
                    return await self._on_prompt(rid, watch, request)

                outcome = await client.result(
                    task_id, on_input=handler, timeout=self._pool.options.result_timeout
                )
                self._writer.apply(rid, self._outcome_events(rid, outcome))
        except TaskError as exc:
            # The regular poll records the retrieval condition; this is only the prompt path.
            log.info("tasks/result watcher for %s ended: %s", rid, exc.failure_class)
            watch.error = exc
            if exc.failure_class == "transient":
                self._pool.broken(server)
        except Exception:
            log.exception("tasks/result watcher for %s failed", rid)
        finally:
            watch.first_input.set()
            watch.ended.set()
            # Only this watch's own entry: a newer watch for the same receipt may already
            # have replaced it, and must not be forgotten by the old one's exit.
            if self._watches.get(rid) is watch:
                del self._watches[rid]
                # Its requests closed with it (the task ended, or the stream did): a
                # handler the server did not cancel must not keep their params.
                for held in [k for k in self._sampling if k[0] == rid]:
                    del self._sampling[held]

    def _outcome_events(self, rid: str, outcome: TaskOutcome) -> list[Event]:
        """The result and, as the reconciler would, the acceptance verdict on it.

        The receipt is terminal once this commits, so the reconciler never sees this
        result: the ``--accept-if`` check must run here or it stays pending for ever.
        """
        events: list[Event] = [outcome_event(outcome, self.digest_key)]
        if outcome.status == LifecycleState.CANCELLED.value:
            return events  # a cancelled task has no result to judge
        if outcome.result is None and outcome.error is None:
            return events
        receipt = self._writer.store.receipts.get(rid)
        if receipt is None:
            return events
        raw = result_json(outcome.result) if outcome.result is not None else None
        verdict = acceptance_event(receipt, raw)
        if verdict is not None:
            events.append(verdict)
        return events

    async def _on_prompt(
        self, rid: str, watch: Watch, request: InputRequest
    ) -> InputResponse | ErrorData:
        key = legacy_input_key(request, self.digest_key)
        if self.digest_key is not None:
            # A prompt parked before keys were keyed keeps its old (plain-hash) key, so
            # an answer given to it still matches after the upgrade.
            old = legacy_input_key(request)
            if old in watch.expected:
                key = old
        watch.delivered.add(key)
        # Kept before the question is stored: whoever sees the question can have them.
        kept = questions.sampling_params(request)
        if kept is not None:
            self._sampling[(rid, key)] = kept
        try:
            return await self._answer_prompt(rid, watch, key, request)
        finally:
            # The request ends here; a re-delivery of it (another watch) keeps its own.
            if kept is not None and self._sampling.get((rid, key)) is kept:
                del self._sampling[(rid, key)]

    async def _answer_prompt(
        self, rid: str, watch: Watch, key: str, request: InputRequest
    ) -> InputResponse | ErrorData:
        self._writer.apply(rid, [InputRequested(request=seen_request(key, request))])
        watch.first_input.set()
        reply = self._answers.pop((rid, key), None)
        if reply is None:
            event = self._waiters.setdefault((rid, key), anyio.Event())
            with self.clock.move_on_after(self.answer_wait_s):
                await event.wait()
            self._waiters.pop((rid, key), None)
            reply = self._answers.pop((rid, key), None)
        if reply is None:
            # Bounded wait: close this tasks/result; the prompt stays pending and is asked
            # again on a later check (the server re-delivers on a new tasks/result). Not
            # -1 or -32600: those decline a sampling or roots request.
            watch.scope.cancel()
            return ErrorData(code=INTERNAL_ERROR, message="no answer yet")
        self._writer.apply(rid, [InputAnswered(key=key, status=answer_status(reply))])
        # A sampling or roots request gets its result (or a decline's error), made from
        # the person's form answer; an elicitation gets the answer itself.
        response: InputResponse | ErrorData = questions.response(request, reply)
        return response

    async def _expect_redelivery(self, rid: str, watch: Watch, expected: set[str]) -> None:
        await self.clock.sleep(self.redeliver_wait_s)
        if self._watches.get(rid) is not watch:
            return  # this watch ended (or was replaced): its deliveries decide nothing now
        missing = sorted(expected - watch.delivered)
        if missing:
            events = [InputAnswered(key=k, status=AnswerStatus.LOST) for k in missing]
            self._writer.apply(rid, events)
            log.info("prompt lost for %s: %d request(s) not re-delivered", rid, len(missing))
