"""What a person (or agent) does through the Supervisor: call, answer, cancel, accept.

Mixed into :class:`chit.runtime.Supervisor`; every method runs on its event loop.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import ElicitResult

from chit import clock
from chit.errors import Conflict, NotFound, UsageError
from chit.receipts import (
    AcceptanceDecided,
    AcceptanceState,
    AnswerStatus,
    CancelAcknowledged,
    CancelRequested,
    CancelUnsupported,
    Event,
    HandleRef,
    InputAnswered,
    Intent,
    IntentState,
    LifecycleState,
    ObservationSource,
    Receipt,
    RetrievalCondition,
    RetrievalFailed,
    TaskProtocol,
    args_digest,
    new_receipt_id,
    open_receipt,
    sync_receipt,
)
from chit.receipts.acceptance import parse_check
from chit.receipts.answers import validate_answer
from chit.reconcile import acceptance_event, handle_aad, result_event, result_json, status_event
from chit.reconcile.inbox import answer_status
from chit.reconcile.writer import ReceiptWriter
from chit.servers.tools import ServerProtocolError, ServerUnreachable
from chit.store import AlreadyExists
from chit.tasks import wire
from chit.tasks.client import SyncResult, TaskClient, TaskError, TaskHandle

if TYPE_CHECKING:
    from chit.reconcile import ConnectionPool, HandleBook, LegacyInbox, Reconciler
    from chit.runtime.events import EventBus
    from chit.store import Store


def check_expression(accept_if: str | None) -> None:
    """Refuse an unreadable acceptance expression before anything is sent."""
    if accept_if is not None:
        try:
            parse_check(accept_if)
        except ValueError as exc:
            raise UsageError(f"--accept-if: {exc}") from exc


def _typed(exc: TaskError, what: str) -> Exception:
    if exc.failure_class == "transient":
        return ServerUnreachable(f"{what}: {exc}")
    return ServerProtocolError(f"{what}: {exc}")


class Actions:
    """Call, answer, cancel, accept and reject (see ``Supervisor``)."""

    store: Store
    pool: ConnectionPool
    handles: HandleBook
    writer: ReceiptWriter
    bus: EventBus
    inbox: LegacyInbox
    reconciler: Reconciler
    _sending: set[str]
    intent_owner: str

    def arguments_digest(self, arguments: dict[str, Any]) -> str:
        """The keyed digest a call's arguments are recorded under (never the values)."""
        return args_digest(arguments, key=self.handles.vault.digest_key())

    def same_arguments(self, arguments: dict[str, Any], recorded: str) -> bool:
        """True when ``arguments`` are the ones a stored digest was made of.

        Intents recorded before digests were keyed carry a plain ``sha256:`` digest;
        they are compared the same way, so their retries keep working.
        """
        if recorded.startswith("sha256:"):
            return hmac.compare_digest(args_digest(arguments), recorded)
        return hmac.compare_digest(self.arguments_digest(arguments), recorded)

    async def _client(self, server: str) -> TaskClient:
        try:
            return await self.pool.get(server)
        except TaskError as exc:
            raise ServerUnreachable(f"cannot reach server {server!r}: {exc.message}") from exc

    async def send_intent(
        self,
        intent: Intent,
        arguments: dict[str, Any],
        *,
        ttl_ms: int | None,
        accept_if: str | None,
    ) -> Receipt:
        """Send a stored ``sending`` intent and record what the server answered."""
        client = await self._client(intent.server)
        key = intent.request_key
        self._sending.add(key)
        try:
            started = await client.start(intent.tool, arguments, request_key=key, ttl_ms=ttl_ms)
        except TaskError as exc:
            if exc.failure_class == "transient":
                self.pool.broken(intent.server)
                self.store.intents.mark(key, IntentState.UNKNOWN, error=str(exc)[:300])
                raise ServerUnreachable(
                    f"the call's outcome is unknown ({exc.message}); see 'chit intents' to "
                    f"retry {key} with the same request key or abandon it"
                ) from exc
            self.store.intents.mark(key, IntentState.REJECTED, error=str(exc)[:300])
            raise _typed(exc, "the server refused the call") from exc
        finally:
            self._sending.discard(key)
        now = clock.now()
        rid = new_receipt_id(now)
        required = accept_if is not None
        if isinstance(started, TaskHandle):
            return self._record_task(intent, started, rid, accept_if)
        assert isinstance(started, SyncResult)
        tr = sync_receipt(
            intent,
            receipt_id=rid,
            result=result_event(started.result, None, digest_key=self.handles.vault.digest_key()),
            now=now,
            not_task_reason=started.reason.value,
            acceptance_check=accept_if,
            acceptance_required=required,
        )
        receipt = self._record(intent, tr.receipt, tr.observation, None, None)
        verdict = acceptance_event(receipt, result_json(started.result))
        if verdict is not None and receipt.receipt_id == rid:
            receipt = self.writer.apply(rid, [verdict])
        return receipt

    def _record_task(
        self, intent: Intent, handle: TaskHandle, rid: str, accept_if: str | None
    ) -> Receipt:
        vault = self.handles.vault
        blob = vault.seal(handle.task_id, handle_aad(rid, intent.server))
        fp = vault.fingerprint(handle.task_id)
        protocol = (
            TaskProtocol.LEGACY
            if handle.generation == wire.PROTOCOL_2025
            else TaskProtocol.EXTENSION
        )
        tr = open_receipt(
            intent,
            receipt_id=rid,
            protocol=protocol,
            created=status_event(handle, ObservationSource.CREATE),
            now=clock.now(),
            handle=HandleRef(fingerprint=fp, key_id=vault.kid.hex()),
            acceptance_check=accept_if,
            acceptance_required=accept_if is not None,
        )
        receipt = self._record(intent, tr.receipt, tr.observation, blob, fp)
        self.handles.remember(receipt.receipt_id, handle.task_id)
        return receipt

    def _record(
        self,
        intent: Intent,
        receipt: Receipt,
        observation: Any,
        blob: bytes | None,
        fp: str | None,
    ) -> Receipt:
        try:
            stored = self.store.receipts.record_acceptance(intent, receipt, observation, blob, fp)
        except AlreadyExists:
            # An idempotent retry answered with the task we already hold a receipt for.
            existing = self.store.receipts.by_request_key(intent.request_key)
            if existing is None:
                raise
            self.store.intents.mark(
                intent.request_key, IntentState.ACCEPTED, receipt_id=existing.receipt_id
            )
            return existing
        self.bus.receipt_changed(None, stored, ("receipt",))
        return stored

    async def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        purpose: str | None = None,
        work_ref: str | None = None,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """Call ``tool`` on ``server`` as a task; return its receipt.

        The intent is committed before the request leaves; the receipt, its sealed
        handle and its first observation are committed in one transaction when the
        server accepts. A synchronous answer gives a completed receipt saying why.

        Raises:
            UsageError: bad acceptance expression. NotFound: unknown server.
            ServerUnreachable: no connection, or the outcome is unknown (intent kept).
            ServerProtocolError: the server refused the call.
        """
        from chit.receipts import new_intent, new_request_key

        check_expression(accept_if)
        args = dict(arguments or {})
        await self._client(server)  # connect first: nothing is sent before the intent
        now = clock.now()
        intent = new_intent(
            request_key=new_request_key(now),
            server=server,
            tool=tool,
            args_digest=self.arguments_digest(args),
            now=now,
            purpose=purpose,
            work_ref=work_ref,
        )
        self.store.intents.begin(intent, owner=self.intent_owner)
        return await self.send_intent(intent, args, ttl_ms=ttl_ms, accept_if=accept_if)

    # --- answer ------------------------------------------------------------------------

    async def answer(
        self,
        receipt_id: str,
        key: str | None = None,
        content: dict[str, Any] | None = None,
        *,
        decline: bool = False,
        cancel: bool = False,
    ) -> Receipt:
        """Answer (or decline / cancel) a pending input request.

        Raises:
            UsageError: the answer does not fit the request's schema, or the key is ambiguous.
            Conflict: nothing pending under that key, or the prompt was lost.
        """
        receipt = self.store.receipts.get_by_prefix(receipt_id)
        request = self._pending_request(receipt, key)
        action = "decline" if decline else "cancel" if cancel else "accept"
        if action == "accept":
            if content is None:
                raise UsageError("give the answer (--json), or --decline / --cancel")
            errors = validate_answer(request.requested_schema, content)
            if errors:
                raise UsageError("the answer does not fit the request: " + "; ".join(errors))
        reply = ElicitResult(action=action, content=content if action == "accept" else None)
        task_id = self.handles.task_id(receipt)
        rid = receipt.receipt_id
        if receipt.protocol is TaskProtocol.EXTENSION:
            client = await self._client(receipt.server)
            try:
                await client.answer(task_id, {request.key: reply})
            except TaskError as exc:
                raise _typed(exc, "the server did not take the answer") from exc
            after = self.writer.apply(
                rid, [InputAnswered(key=request.key, status=answer_status(reply))]
            )
            self.reconciler.kick([rid], ObservationSource.ANSWER)
            return after
        return await self._answer_legacy(receipt, request.key, reply, task_id)

    def _pending_request(self, receipt: Receipt, key: str | None) -> Any:
        if receipt.is_terminal:
            raise Conflict(f"receipt {receipt.receipt_id} is {receipt.state}: nothing to answer")
        pending = receipt.pending_inputs
        if key is None:
            if not pending:
                raise Conflict(f"receipt {receipt.receipt_id} has no pending input request")
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

    async def _answer_legacy(
        self, receipt: Receipt, key: str, reply: ElicitResult, task_id: str
    ) -> Receipt:
        # 2025: the prompt is answered on an open tasks/result — this process's watcher,
        # or a new one on which the server must re-deliver the prompt.
        rid = receipt.receipt_id
        self.inbox.deliver(rid, key, reply)
        if not self.inbox.watching(rid):
            await self._client(receipt.server)
            self.inbox.ensure_watch(receipt, task_id)
        with anyio.move_on_after(self.inbox.redeliver_wait_s + 5):
            while True:
                current = self.store.receipts.require(rid)
                request = current.input_request(key)
                if request is None or not request.is_pending or current.is_terminal:
                    break
                await anyio.sleep(0.05)
        current = self.store.receipts.require(rid)
        request = current.input_request(key)
        if request is not None and request.answer_status is AnswerStatus.LOST:
            raise Conflict(
                f"prompt lost: the server did not re-deliver input request {key!r} on a new "
                "tasks/result; the task cannot receive this answer"
            )
        if request is not None and request.is_pending:
            raise ServerUnreachable(f"the server did not take the answer to {key!r} in time")
        # The reply leaves with the callback's return; see the server move on before this
        # process may exit and close the connection under it.
        with anyio.move_on_after(self.inbox.redeliver_wait_s):
            while current.state is LifecycleState.INPUT_REQUIRED and not current.pending_inputs:
                await anyio.sleep(0.1)
                current = await self.reconciler.check(rid, ObservationSource.ANSWER) or current
        return current

    # --- cancel ------------------------------------------------------------------------

    async def cancel(self, receipt_id: str) -> Receipt:
        """Ask the server to cancel; record requested → acknowledged → observed.

        The returned receipt carries the posture; on 2026 the cancel is cooperative and
        the final state (possibly ``completed``) is observed by later checks.
        """
        receipt = self.store.receipts.get_by_prefix(receipt_id)
        rid = receipt.receipt_id
        if receipt.is_terminal or receipt.protocol is TaskProtocol.SYNC:
            return self.writer.apply(rid, [CancelRequested()])
        # Open the handle and connect first: ``requested`` is recorded only when the
        # request can actually leave (HandleUnavailable exits 4, unreachable exits 6).
        task_id = self.handles.task_id(receipt)
        client = await self._client(receipt.server)
        self.writer.apply(rid, [CancelRequested()])
        events: list[Event]
        try:
            done = await client.cancel(task_id)
        except TaskError as exc:
            if exc.failure_class == "incompatible":
                events = [CancelUnsupported(reason=exc.message)]
            elif exc.failure_class == "lost":
                events = [
                    RetrievalFailed(
                        condition=RetrievalCondition.VANISHED,
                        message=exc.message,
                        error_code=exc.code,
                        source=ObservationSource.CANCEL,
                    )
                ]
            else:
                raise _typed(exc, "the cancel request failed") from exc
            return self.writer.apply(rid, events)
        snap = done.snapshot
        if done.kind == "cancelled" and snap is not None:
            events = [
                CancelAcknowledged(status=LifecycleState(snap.status), message=snap.status_message)
            ]
        elif done.kind == "acknowledged":
            events = [CancelAcknowledged()]
        else:
            events = [CancelUnsupported(reason="the task had already ended", already_terminal=True)]
            if snap is not None:
                events.insert(0, status_event(snap, ObservationSource.CANCEL))
        after = self.writer.apply(rid, events)
        if not after.is_terminal or after.outcome is None:
            after = await self.reconciler.check(rid, ObservationSource.CANCEL) or after
        return after

    # --- acceptance --------------------------------------------------------------------

    def accept(self, receipt_id: str, why: str | None = None) -> Receipt:
        """Record a person's acceptance of a terminal receipt's outcome."""
        return self._decide(receipt_id, AcceptanceState.ACCEPTED, why)

    def reject(self, receipt_id: str, why: str) -> Receipt:
        """Record a person's rejection (``why`` is required)."""
        if not why.strip():
            raise UsageError("say why the outcome is rejected (--why)")
        return self._decide(receipt_id, AcceptanceState.REJECTED, why)

    def _decide(self, receipt_id: str, state: AcceptanceState, why: str | None) -> Receipt:
        return decide_acceptance(self.writer, receipt_id, state, why)


def decide_acceptance(
    writer: ReceiptWriter, receipt_id: str, state: AcceptanceState, why: str | None
) -> Receipt:
    """Record a person's verdict on a terminal receipt (no server, no vault needed).

    Raises:
        Conflict: the receipt is not terminal yet.
        UsageError: a rejection without a reason.
    """
    if state is AcceptanceState.REJECTED and not (why or "").strip():
        raise UsageError("say why the outcome is rejected (--why)")
    receipt = writer.store.receipts.get_by_prefix(receipt_id)
    if not receipt.is_terminal:
        raise Conflict(f"receipt {receipt.receipt_id} is {receipt.state}: decide once it ended")
    event = AcceptanceDecided(
        state=state, check=receipt.acceptance.check, why=why, decided_by="user"
    )
    after = writer.apply(receipt.receipt_id, [event])
    if after.acceptance.state is not state:
        raise Conflict(f"receipt {receipt.receipt_id}: the acceptance could not be recorded")
    return after
