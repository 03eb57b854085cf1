"""A server's question during a host's call that is not a task: chit's inbox holds it.

A host calls a tool that cannot be a task (passed on as it is), and the server asks
``elicitation/create`` while the call runs. When no host can answer it (none declared
elicitation, or the server's ``prompts`` is ``chit``), or with ``prompts = "both"``,
the question waits in chit's inbox like a task's prompt:

* the call's first question opens a receipt for it — synchronous (no task exists), the
  host named, the keyed digest of its arguments — and the question becomes its pending
  input request (server text redacted by the writer, as for tasks);
* the server's request stays open meanwhile; the host's, too — a progress notification
  names the receipt at once and every :func:`~chit.proxy.wire.heartbeat_s` seconds (if
  the host asked for progress), so a host that resets its timeout on progress waits;
* ``chit answer`` (any process, through the daemon) or the TUI answers it with the same
  forms and validation as a task's prompt; the answer goes back to the server, which
  goes on, and the host's call returns its result. With ``both`` the host is asked too,
  and the first answer wins;
* when the call ends — its result, an error, the host's cancel or timeout, the host
  gone, or ``chit cancel`` of the receipt (which cancels the call upstream) — the
  receipt ends with it: ``completed``/``failed`` with the call's outcome, or
  ``cancelled``; a question still pending is marked lost.

These receipts live only as long as the call: a question waits in the process that
holds the server's session (the daemon), never longer than the call's own timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, ElicitResult, ErrorData, InputRequest

from chit import clock
from chit.proxy import wire as pwire
from chit.proxy.models import Answer, ForwardParams
from chit.receipts import (
    AnswerStatus,
    Event,
    HostLeft,
    InputAnswered,
    InputRequested,
    LifecycleState,
    ObservationSource,
    Receipt,
    ResultObserved,
    StatusObserved,
    call_receipt,
    new_intent,
    new_receipt_id,
    new_request_key,
)
from chit.reconcile import result_event
from chit.reconcile.inbox import answer_status
from chit.reconcile.outcomes import legacy_input_key, seen_request
from chit.runtime import Supervisor
from chit.tasks.client import TaskError
from chit.tasks.client.parse import parse_call_result

if TYPE_CHECKING:
    from chit.proxy.upstream import Attachment

log = logging.getLogger("chit.proxy")

NOT_TASK = "the tool cannot be a task; the server asked during the call (chit proxy)"
UNPROMPTED = "no call: the server asked on its own, outside any call (chit proxy)"
HostAsk = Callable[[], Awaitable[Any]]
"""Asks the host the same question (``prompts = "both"``); its raw result."""


@dataclass(eq=False)
class _Wait:
    """One question of a call waiting for its first answer."""

    event: anyio.Event = field(default_factory=anyio.Event)
    reply: ElicitResult | None = None


@dataclass(eq=False)
class _Call:
    """A forwarded call with questions in chit's inbox (its receipt)."""

    receipt_id: str
    att: Attachment
    route: str
    waits: dict[str, _Wait] = field(default_factory=dict)
    stopped: bool = False
    """``chit cancel`` stopped it (the call is cancelled upstream)."""


class CallPrompts:
    """Questions of calls that are not tasks, held in chit's inbox (module docstring)."""

    def __init__(self, supervisor: Supervisor) -> None:
        """Record through ``supervisor``; take its answers and cancels for these receipts."""
        self.sup = supervisor
        self.calls: dict[tuple[int, str], _Call] = {}
        self.receipts: dict[str, _Call] = {}
        supervisor.answers.live = self.answer
        supervisor.cancels.live = self.stop

    # --- the server asks ------------------------------------------------------------

    async def ask(
        self, att: Attachment, route: str, request: InputRequest, host: HostAsk | None
    ) -> ElicitResult | ErrorData:
        """Hold the question in chit's inbox (and ask ``host`` too) until the first answer.

        Returns the answer for the server, or an error once the call ended unanswered.
        """
        call = self.calls.get((att.number, route)) or self._open(att, route)
        rid = call.receipt_id
        key = self._key(rid, request)
        wait = _Wait()
        call.waits[key] = wait
        seen = InputRequested(request=seen_request(key, request))
        asked = self.sup.writer.apply(
            rid, [seen, StatusObserved(status=LifecycleState.INPUT_REQUIRED, source=seen.source)]
        )
        log.info("a question of %s waits in chit's inbox (receipt %s)", att.server, rid)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._remind, att, route, rid, asked)
                if host is not None:
                    tg.start_soon(self._host_answers, host, rid, key, wait)
                await wait.event.wait()
                tg.cancel_scope.cancel()
        finally:
            call.waits.pop(key, None)
            if not wait.event.is_set() and (att.number, route) in self.calls:
                self._withdrawn(rid, key)  # the server gave up on its question
        if wait.reply is None:
            return ErrorData(code=INVALID_REQUEST, message="the call ended before an answer")
        return wait.reply

    def _open(self, att: Attachment, route: str) -> _Call:
        """The call's receipt (its first question): intent and receipt in one commit."""
        p: ForwardParams | None = att.forwarded.get(route)
        params = pwire.host_params(p.params) if p is not None else {}
        tool = params.get("name")
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        host = att.params.host
        now = clock.now()
        intent = new_intent(
            request_key=new_request_key(now),
            server=att.server,
            tool=tool if isinstance(tool, str) and tool else "(unnamed tool)",
            args_digest=self.sup.calls.arguments_digest(arguments),
            now=now,
            purpose=f"started by {host.label} through chit proxy",
        )
        tr = call_receipt(intent, receipt_id=new_receipt_id(now), now=now, not_task_reason=NOT_TASK)
        first = tr.receipt.model_copy(update={"host": host})
        stored = self.sup.store.receipts.record_acceptance(
            intent, first, tr.observation, None, None
        )
        # Who holds the question: a daemon that starts after this process is gone ends
        # the receipt (chit.proxy.lost), never while this process may still answer it.
        self.sup.store.intents.set_owner(intent.request_key, self.sup.intent_owner)
        self.sup.writer.notify(None, stored, ("receipt",))
        call = _Call(stored.receipt_id, att, route)
        self.calls[(att.number, route)] = call
        self.receipts[stored.receipt_id] = call
        return call

    def _key(self, rid: str, request: InputRequest) -> str:
        """The question's inbox key (the wire has none); unique within the receipt."""
        key = legacy_input_key(request, self.sup.handles.vault.digest_key())
        receipt = self.sup.store.receipts.require(rid)
        n, base = 1, key
        while receipt.input_request(key) is not None:  # the same question asked again
            n += 1
            key = f"{base}-{n}"
        return key

    async def _remind(self, att: Attachment, route: str, rid: str, receipt: Receipt) -> None:
        """Tell the host where its call waits, now and on every heartbeat."""
        message = f"the server asks a question: answer it in chit (chit answer {rid})"
        step = 0
        while True:
            step += 1
            try:
                with anyio.fail_after(10):
                    await att.peer.progress(route, step, None, message)
            except Exception as exc:  # the host's stream is gone: its cancel follows
                log.debug("reminder not sent: %s", type(exc).__name__)
            await anyio.sleep(pwire.heartbeat_s())

    async def _host_answers(self, host: HostAsk, rid: str, key: str, wait: _Wait) -> None:
        """``prompts = "both"``: the host's answer, if it comes first."""
        try:
            raw = await host()
            reply = ElicitResult.model_validate(raw)
        except Exception as exc:  # an error, an invalid answer, a host gone
            log.info("the host did not answer (%s); the question waits in chit", exc)
            return
        self._settle(rid, key, wait, reply)

    # --- answers and cancels from chit -------------------------------------------------

    def answer(self, receipt: Receipt, key: str, reply: ElicitResult) -> Receipt | None:
        """A person's answer (``Answers.live``); None when no such question waits here."""
        call = self.receipts.get(receipt.receipt_id)
        wait = call.waits.get(key) if call is not None else None
        if wait is None or wait.event.is_set():
            return None
        return self._settle(receipt.receipt_id, key, wait, reply)

    def _settle(self, rid: str, key: str, wait: _Wait, reply: ElicitResult) -> Receipt:
        """Record the first answer and release the server's request with it."""
        if wait.event.is_set():
            return self.sup.store.receipts.require(rid)
        wait.reply = reply
        wait.event.set()
        events: list[Event] = [InputAnswered(key=key, status=answer_status(reply))]
        receipt = self.sup.writer.apply(rid, events)
        if receipt.state is LifecycleState.INPUT_REQUIRED and not receipt.pending_inputs:
            working = StatusObserved(status=LifecycleState.WORKING, source=ObservationSource.ANSWER)
            receipt = self.sup.writer.apply(rid, [working])
        return receipt

    def _withdrawn(self, rid: str, key: str) -> None:
        """The server stopped waiting for one question while its call goes on."""
        try:
            receipt = self.sup.writer.apply(rid, [InputAnswered(key=key, status=AnswerStatus.LOST)])
            if receipt.state is LifecycleState.INPUT_REQUIRED and not receipt.pending_inputs:
                self.sup.writer.apply(rid, [StatusObserved(status=LifecycleState.WORKING)])
        except Exception:
            log.exception("the withdrawn question of receipt %s was not recorded", rid)

    def stop(self, receipt: Receipt) -> bool:
        """``chit cancel`` of such a receipt: cancel its call upstream (``Cancels.live``)."""
        call = self.receipts.get(receipt.receipt_id)
        if call is None:
            return False
        call.stopped = True
        scope = call.att.routes.get(call.route)
        if scope is not None:
            scope.cancel()
        return True

    # --- the call ends --------------------------------------------------------------

    def ended(self, att: Attachment, route: str, answer: Answer | None) -> None:
        """The forwarded call ended (``answer``; None: cancelled): its receipt ends too."""
        call = self.calls.pop((att.number, route), None)
        if call is None:
            return
        self.receipts.pop(call.receipt_id, None)
        for wait in call.waits.values():
            wait.event.set()  # unanswered: the server gets an error, the prompt is lost
        try:
            self.sup.writer.apply(call.receipt_id, _end_events(call, answer, self.sup))
        except Exception:
            log.exception("the end of the call of receipt %s was not recorded", call.receipt_id)


def _end_events(call: _Call, answer: Answer | None, sup: Supervisor) -> list[Event]:
    """What ended the call, as receipt events."""
    if answer is None or call.stopped:
        why = "cancelled in chit" if call.stopped else "the host cancelled, timed out or left"
        events: list[Event] = [] if call.stopped else [HostLeft(why=why)]
        events.append(
            StatusObserved(
                status=LifecycleState.CANCELLED,
                source=ObservationSource.CANCEL,
                message=f"the call was cancelled on the server: {why}",
            )
        )
        return events
    key = sup.handles.vault.digest_key()
    if answer.error is not None:
        code = answer.error.get("code")
        message = str(answer.error.get("message", ""))
        return [
            ResultObserved(
                is_error=True,
                error_code=code if isinstance(code, int) else INTERNAL_ERROR,
                error_message=message[:2000],
                status=LifecycleState.FAILED,
            )
        ]
    try:
        result = parse_call_result(answer.result or {}, "tools/call")
    except TaskError as exc:
        return [
            ResultObserved(
                is_error=True,
                error_code=INTERNAL_ERROR,
                error_message=f"the server's answer cannot be read: {exc.message}",
                status=LifecycleState.FAILED,
            )
        ]
    return [result_event(result, None, status=LifecycleState.COMPLETED, digest_key=key)]


__all__ = ["NOT_TASK", "UNPROMPTED", "CallPrompts"]
