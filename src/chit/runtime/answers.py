"""Answers: a person's reply to a pending input request, delivered the way its task asks.

2026 tasks take the answer in a request of their own; a 2025 task's prompt is answered
on an open ``tasks/result`` — this process's watcher, or a new one on which the server
must re-deliver the prompt (:class:`chit.reconcile.LegacyInbox`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import anyio
from mcp_types import ElicitResult
from pydantic import ValidationError

from chit.clock import Clock, current_clock
from chit.errors import Conflict, NotFound, UsageError
from chit.receipts import (
    AnswerStatus,
    InputAnswered,
    InputRequest,
    LifecycleState,
    ObservationSource,
    Receipt,
    TaskProtocol,
)
from chit.receipts.answers import validate_answer
from chit.reconcile import (
    ConnectionPool,
    HandleBook,
    LegacyInbox,
    ReceiptWriter,
    Reconciler,
    answer_status,
    questions,
)
from chit.reconcile.boundary import is_derived_key, server_key
from chit.reconcile.inbox import Watch
from chit.runtime.servers import connect, typed_error
from chit.servers.tools import ServerUnreachable
from chit.tasks.client import TaskClient, TaskError

MOVE_ON_POLL_S = 0.1
"""After a 2025 answer, how often the task is checked until the server moves on."""

RE_READ_S = 0.5
"""While an answer waits for its prompt, how often the store is re-read for writes of
other processes (this process's own writes wake the wait at once)."""


class Answers:
    """Validates answers against their request's schema and delivers them."""

    def __init__(
        self,
        writer: ReceiptWriter,
        handles: HandleBook,
        pool: ConnectionPool,
        inbox: LegacyInbox,
        reconciler: Reconciler,
        *,
        clock: Clock | None = None,
    ) -> None:
        """Wire the parts; the bounded waits for a 2025 server run on ``clock``."""
        self.clock = clock or current_clock()
        self.writer = writer
        self.store = writer.store
        self.handles = handles
        self.pool = pool
        self.inbox = inbox
        self.reconciler = reconciler
        self.host_asks: Callable[[Receipt, InputRequest], str | None] | None = None
        """Set by ``chit proxy``'s engine side: why a person may not answer a prompt in
        chit now (it is with the agent host, and the server's ``prompts`` is ``host``)."""
        self.live: Callable[[Receipt, str, ElicitResult], Receipt | None] | None = None
        """Set by ``chit proxy``'s engine side: delivers an answer to a question a server
        asked during a call that is not a task (its request waits in this process);
        returns the receipt after, or None when no such question waits here."""

    async def answer(
        self,
        receipt_id: str,
        key: str | None = None,
        content: dict[str, Any] | None = None,
        *,
        decline: bool = False,
        cancel: bool = False,
        validate: bool = True,
        by_host: bool = False,
    ) -> Receipt:
        """Answer (or decline / cancel) a pending input request.

        ``validate=False`` leaves the judgement to the server (``chit proxy`` passes a
        host's answer on as the host gave it, as it would reach the server directly);
        the answer must still be a well-formed elicitation result. ``by_host``: the
        answer comes from the agent host through ``chit proxy``, not from a person.

        Raises:
            UsageError: the answer does not fit the request's schema, or the key is ambiguous.
            Conflict: nothing pending under that key, the prompt was lost, or (a
                person's answer) the prompt is the host's to answer.
        """
        receipt = self.store.receipts.get_by_prefix(receipt_id)
        request = pending_request(receipt, key)
        if not by_host and self.host_asks is not None:
            reason = self.host_asks(receipt, request)
            if reason is not None:
                raise Conflict(reason)
        action = "decline" if decline else "cancel" if cancel else "accept"
        if action == "accept":
            if content is None:
                raise UsageError("give the answer (--json), or --decline / --cancel")
            errors = validate_answer(request.requested_schema, content) if validate else []
            # A roots answer shares only file:// URIs (the schema cannot say so).
            errors += questions.answer_problems(request.kind, content) if validate else []
            if errors:
                raise UsageError("the answer does not fit the request: " + "; ".join(errors))
        try:
            reply = ElicitResult(action=action, content=content if action == "accept" else None)
        except ValidationError as exc:
            raise UsageError(f"the answer is not a valid elicitation result: {exc}") from None
        if self.live is not None:
            delivered = self.live(receipt, request.key, reply)
            if delivered is not None:
                return delivered
        if receipt.protocol is TaskProtocol.SYNC:
            raise Conflict(
                f"input request {request.key!r} was asked during a call that is not a task,"
                " and that call no longer waits for it (it ended, or chit restarted)"
            )
        task_id = self.handles.task_id(receipt)
        rid = receipt.receipt_id
        if receipt.protocol is TaskProtocol.EXTENSION:
            client = await connect(self.pool, receipt.server)
            try:
                server_key = await self._server_key(client, task_id, request.key)
                response = questions.task_response(request.kind, reply)
                await client.answer(task_id, {server_key: response})
            except TaskError as exc:
                await self._undeliverable(receipt, request.key, exc)
            after = self.writer.apply(
                rid, [InputAnswered(key=request.key, status=answer_status(reply))]
            )
            self.reconciler.kick([rid], ObservationSource.ANSWER)
            return after
        return await self._legacy(receipt, request.key, reply, task_id)

    async def _server_key(self, client: TaskClient, task_id: str, key: str) -> str:
        """The server's own key for a stored input-request key.

        A server key that held a secret was stored as a derived ``k-…`` key
        (``boundary.derived_key``); the live ``inputRequests`` say which key it was.
        """
        if not is_derived_key(key):
            return key
        snap = await client.get(task_id)
        found = server_key(key, snap.input_requests, self.handles.vault.digest_key())
        if found is None:
            raise Conflict(f"the server no longer asks input request {key!r}")
        return found

    async def _legacy(
        self, receipt: Receipt, key: str, reply: ElicitResult, task_id: str
    ) -> Receipt:
        rid = receipt.receipt_id
        self.inbox.deliver(rid, key, reply)
        if not self.inbox.watching(rid):
            await connect(self.pool, receipt.server)
            self.inbox.ensure_watch(receipt, task_id)
        watch = self.inbox.watch(rid)
        # This process's watcher records the answer through the same writer: wait for
        # that write, or for the watcher to end without it (re-reading now and then:
        # another process may end the task).
        with self.clock.move_on_after(self.inbox.redeliver_wait_s + 5):
            while True:
                current = self.store.receipts.require(rid)
                request = current.input_request(key)
                if request is None or not request.is_pending or current.is_terminal:
                    break
                if watch is None or watch.ended.is_set():
                    break
                await self._change_or_end(rid, watch)
        current = self.store.receipts.require(rid)
        request = current.input_request(key)
        if request is not None and request.answer_status is AnswerStatus.LOST:
            raise Conflict(
                f"prompt lost: the server did not re-deliver input request {key!r} on a new "
                "tasks/result; the task cannot receive this answer"
            )
        if request is not None and request.is_pending and not current.is_terminal:
            await self._undeliverable(current, key, watch.error if watch is not None else None)
        # The reply leaves with the callback's return; see the server move on before this
        # process may exit and close the connection under it.
        with self.clock.move_on_after(self.inbox.redeliver_wait_s):
            while current.state is LifecycleState.INPUT_REQUIRED and not current.pending_inputs:
                await self.clock.sleep(MOVE_ON_POLL_S)
                current = await self.reconciler.check(rid, ObservationSource.ANSWER) or current
        return current

    async def _change_or_end(self, rid: str, watch: Watch) -> None:
        """Return at the receipt's next change, the watcher's end, or ``RE_READ_S``."""
        with self.clock.move_on_after(RE_READ_S):
            async with anyio.create_task_group() as tg:

                async def changed() -> None:
                    await self.writer.wait_change(rid)
                    tg.cancel_scope.cancel()

                async def ended() -> None:
                    await watch.ended.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(changed)
                tg.start_soon(ended)

    async def _undeliverable(self, receipt: Receipt, key: str, error: TaskError | None) -> NoReturn:
        """Say why the answer to ``key`` did not reach the server (and record what is known).

        Raises:
            Conflict: the server no longer knows the task (its receipt is checked, so it
                now says so: vanished or expired) — exit 8, as for a lost prompt.
            ServerUnreachable: the server could not be reached (exit 6).
            ServerProtocolError: it refused the answer otherwise (exit 7).
        """
        if error is not None and error.failure_class == "lost":
            checked = await self.reconciler.check(receipt.receipt_id, ObservationSource.ANSWER)
            state = checked.retrieval.value if checked is not None else "lost"
            raise Conflict(
                f"the server no longer knows this task (receipt {receipt.receipt_id} is"
                f" {state}): the answer to {key!r} cannot be delivered"
            )
        if error is not None and error.failure_class != "transient":
            raise typed_error(error, f"the server did not take the answer to {key!r}")
        why = f": {error.message}" if error is not None else " in time"
        raise ServerUnreachable(f"the server did not take the answer to {key!r}{why}")


def nothing_pending(receipt: Receipt) -> str:
    """Why there is nothing to answer on a live ``receipt`` — one line for a person.

    A server's ``input_required`` status can reach the receipt before its question does
    (2025: the question comes on ``tasks/result``; 2026: on a later ``tasks/get``), so a
    person who saw the status and answered at once is told the question is on its way,
    not that there is none.
    """
    rid = receipt.receipt_id
    if receipt.state is LifecycleState.INPUT_REQUIRED:
        return (
            f"receipt {rid} waits for input, but the server's question has not reached chit"
            " yet: try again in a moment"
        )
    return f"receipt {rid} has no pending input request"


def pending_request(receipt: Receipt, key: str | None) -> InputRequest:
    """The pending input request an answer is for (the only one when ``key`` is None).

    Raises:
        Conflict: the receipt ended, nothing is pending, or that request is answered.
        UsageError: several are pending and no key chose one.
        NotFound: no request under ``key``.
    """
    if receipt.is_terminal:
        raise Conflict(f"receipt {receipt.receipt_id} is {receipt.state}: nothing to answer")
    pending = receipt.pending_inputs
    if key is None:
        if not pending:
            raise Conflict(nothing_pending(receipt))
        if len(pending) > 1:
            keys = ", ".join(q.key for q in pending)
            raise UsageError(f"several requests are pending ({keys}); choose one with --key")
        return pending[0]
    request = receipt.input_request(key)
    if request is None:
        raise NotFound(f"receipt {receipt.receipt_id} has no input request {key!r}")
    if not request.is_pending:
        raise Conflict(f"input request {key!r} is {request.answer_status}, not pending")
    return request
