"""A server's question outside a task: chit's inbox holds it.

A host calls a tool that cannot be a task (passed on as it is), and the server asks
``elicitation/create`` — or ``sampling/createMessage`` / ``roots/list``, made forms by
:mod:`chit.reconcile.questions` — while the call runs. When no host can answer it (none
declared the capability, or the server's ``prompts`` is ``chit``), or with ``prompts =
"both"``, the question waits in chit's inbox like a task's prompt:

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

A question the server asks outside any call (:meth:`CallPrompts.ask_alone`) gets a
receipt of its own, which ends with the question.

These receipts live only as long as the server's request: a question waits in the
process that holds the server's session (the daemon), never longer than the request's
own timeout; the next daemon ends those an earlier one left (:mod:`chit.proxy.lost`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import (
    INVALID_REQUEST,
    ElicitResult,
    ErrorData,
    InputRequest,
)

from chit import clock
from chit.proxy import endings
from chit.proxy import wire as pwire
from chit.proxy.models import Answer, ForwardParams
from chit.receipts import (
    AnswerStatus,
    Event,
    HostInfo,
    InputAnswered,
    InputRequested,
    LifecycleState,
    ObservationSource,
    Receipt,
    StatusObserved,
    call_receipt,
    new_intent,
    new_request_key,
)
from chit.reconcile import questions
from chit.reconcile.inbox import answer_status
from chit.reconcile.outcomes import legacy_input_key
from chit.runtime import Supervisor

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

    request: InputRequest
    event: anyio.Event = field(default_factory=anyio.Event)
    reply: Any = None
    """What the server gets (set with ``event``; None: the call ended unanswered)."""


@dataclass(eq=False)
class _Call:
    """A forwarded call with questions in chit's inbox (its receipt), or one question
    the server asked on its own (``att`` None)."""

    receipt_id: str
    att: Attachment | None
    route: str
    waits: dict[str, _Wait] = field(default_factory=dict)
    stopped: bool = False
    """``chit cancel`` stopped it (the call is cancelled upstream)."""
    ended: bool = False


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
    ) -> Any:
        """Hold the question in chit's inbox (and ask ``host`` too) until the first answer.

        Returns the answer for the server, or an error once the call ended unanswered.
        """
        call = self.calls.get((att.number, route)) or self._open(att, route)
        return await self._hold(call, request, host)

    async def ask_alone(self, server: str, request: InputRequest, host: HostAsk | None) -> Any:
        """A question the server asked outside any call: its own receipt, until answered.

        The receipt ends with the question: ``completed`` once answered (or declined) in
        chit, ``cancelled`` when the server stops waiting or a person cancels it.
        """
        call = self._open_alone(server, request)
        try:
            return await self._hold(call, request, host)
        finally:
            call.ended = True
            self.receipts.pop(call.receipt_id, None)
            self._end_alone(call)

    async def _hold(self, call: _Call, request: InputRequest, host: HostAsk | None) -> Any:
        rid = call.receipt_id
        key = self._key(rid, request)
        wait = _Wait(request)
        call.waits[key] = wait
        redactor = self.sup.handles.redactor(self.sup.store.receipts.require(rid))
        seen = InputRequested(request=questions.seen(key, request, redactor.text))
        asked = self.sup.writer.apply(
            rid, [seen, StatusObserved(status=LifecycleState.INPUT_REQUIRED, source=seen.source)]
        )
        log.info("a question waits in chit's inbox (receipt %s)", rid)
        try:
            async with anyio.create_task_group() as tg:
                if call.att is not None:
                    tg.start_soon(self._remind, call.att, call.route, rid, asked)
                if host is not None:
                    tg.start_soon(self._host_answers, host, rid, key, wait)
                await wait.event.wait()
                tg.cancel_scope.cancel()
        finally:
            call.waits.pop(key, None)
            if not wait.event.is_set() and not call.ended and call.att is not None:
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
        tool = tool if isinstance(tool, str) and tool else "(unnamed tool)"
        purpose = f"started by {host.label} through chit proxy"
        stored = self._record(att.server, tool, arguments, purpose, NOT_TASK, host)
        call = _Call(stored.receipt_id, att, route)
        self.calls[(att.number, route)] = call
        self.receipts[stored.receipt_id] = call
        return call

    def _open_alone(self, server: str, request: InputRequest) -> _Call:
        """The receipt of a question the server asked outside any call."""
        method = str(getattr(request, "method", "request"))
        purpose = "the server asked on its own (chit proxy); no host call waits for it"
        stored = self._record(server, f"({method})", {}, purpose, UNPROMPTED, None)
        call = _Call(stored.receipt_id, None, "")
        self.receipts[stored.receipt_id] = call
        return call

    def _record(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        purpose: str,
        reason: str,
        host: HostInfo | None,
    ) -> Receipt:
        """Intent and synchronous receipt in one commit; this process named as holder."""
        now = clock.now()
        intent = new_intent(
            request_key=new_request_key(now),
            server=server,
            tool=tool,
            args_digest=self.sup.calls.arguments_digest(arguments),
            now=now,
            purpose=purpose,
        )
        # The receipt's id is its request key (one index fewer per receipt write: 0009).
        tr = call_receipt(intent, receipt_id=intent.request_key, now=now, not_task_reason=reason)
        first = tr.receipt.model_copy(update={"host": host}) if host is not None else tr.receipt
        stored = self.sup.store.receipts.record_acceptance(
            intent, first, tr.observation, None, None
        )
        # Who holds the question: a daemon that starts after this process is gone ends
        # the receipt (chit.proxy.lost), never while this process may still answer it.
        self.sup.store.intents.set_owner(intent.request_key, self.sup.intent_owner)
        self.sup.writer.notify(None, stored, ("receipt",))
        return stored

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
            reply = questions.host_result(wait.request, raw)
        except Exception as exc:  # an error, an invalid answer, a host gone
            log.info("the host did not answer (%s); the question waits in chit", exc)
            return
        status = answer_status(reply) if isinstance(reply, ElicitResult) else AnswerStatus.ANSWERED
        self._settle(rid, key, wait, reply, status)

    # --- answers and cancels from chit -------------------------------------------------

    def answer(self, receipt: Receipt, key: str, reply: ElicitResult) -> Receipt | None:
        """A person's answer (``Answers.live``); None when no such question waits here.

        ``Answers`` validated it first (a roots answer shares only ``file://`` URIs).
        """
        call = self.receipts.get(receipt.receipt_id)
        wait = call.waits.get(key) if call is not None else None
        if wait is None or wait.event.is_set():
            return None
        response = questions.response(wait.request, reply)
        return self._settle(receipt.receipt_id, key, wait, response, answer_status(reply))

    def _settle(self, rid: str, key: str, wait: _Wait, reply: Any, status: AnswerStatus) -> Receipt:
        """Record the first answer and release the server's request with it."""
        if wait.event.is_set():
            return self.sup.store.receipts.require(rid)
        wait.reply = reply
        wait.event.set()
        events: list[Event] = [InputAnswered(key=key, status=status)]
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
        if call.att is None:  # a question on its own: the server gets an error
            for wait in call.waits.values():
                wait.event.set()
            return True
        scope = call.att.routes.get(call.route)
        if scope is not None:
            scope.cancel()
        return True

    def _end_alone(self, call: _Call) -> None:
        """A question asked outside any call was answered, declined or given up."""
        receipt = self.sup.store.receipts.require(call.receipt_id)
        events = endings.alone_end_events(receipt, stopped=call.stopped)
        try:
            self.sup.writer.apply(call.receipt_id, events)
        except Exception:
            log.exception("the end of question receipt %s was not recorded", call.receipt_id)

    # --- the call ends --------------------------------------------------------------

    def ended(self, att: Attachment, route: str, answer: Answer | None) -> None:
        """The forwarded call ended (``answer``; None: cancelled): its receipt ends too."""
        call = self.calls.pop((att.number, route), None)
        if call is None:
            return
        call.ended = True
        self.receipts.pop(call.receipt_id, None)
        for wait in call.waits.values():
            wait.event.set()  # unanswered: the server gets an error, the prompt is lost
        try:
            self.sup.writer.apply(
                call.receipt_id,
                endings.call_end_events(
                    answer, stopped=call.stopped, digest_key=self.sup.handles.vault.digest_key()
                ),
            )
        except Exception:
            log.exception("the end of the call of receipt %s was not recorded", call.receipt_id)


__all__ = ["NOT_TASK", "UNPROMPTED", "CallPrompts"]
