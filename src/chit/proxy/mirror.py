"""The worker of a proxy task: keep chit's task for the host true to its receipt.

A host that asked for a task holds chit's own task id (a task of the proxy's task
runtime), never the server's. Its worker follows the receipt — the engine keeps the
receipt true by reconciling with the server, across host and proxy restarts — and
mirrors it into the task the host polls:

* the status message, and ``working`` ↔ ``input_required``;
* the receipt's pending prompts become the task's input requests (in the host's own
  generation: 2025 ``elicitation/create``, ``sampling/createMessage`` or ``roots/list``
  on ``tasks/result``, 2026 ``inputRequests``; built by :mod:`chit.proxy.inputs`) when
  the server's ``prompts`` setting lets the host be asked and the host declared the
  capability; the host's answers go to the receipt (first answer wins: a prompt
  answered in chit's inbox is withdrawn from the host; a refused sampling or roots
  answer leaves the question to the person);
* at the end the result, fetched in full (redacted) from the server, or the task's
  error; a task cancelled on the server is cancelled for the host too.

A host's ``tasks/cancel`` cancels the worker, which asks the server to cancel the task.
The tool is registered resumable: after a proxy restart the task store hands the task
to the next proxy, whose worker picks the receipt up again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from chit.engine._groups import sole_error
from chit.engine.models import EngineEvent, ReceiptUpdate, Resync
from chit.errors import ChitError, UsageError
from chit.proxy.inputs import host_request
from chit.receipts import InputKind, InputRequest, LifecycleState, Receipt
from chit.tasks.server import TaskContext, TaskProtocolError
from chit.tasks.server.tools import TaskGone

if TYPE_CHECKING:
    from chit.proxy.host import ProxyHost

log = logging.getLogger("chit.proxy")

ANSWERED_ELSEWHERE: dict[str, Any] = {
    "action": "cancel",
    "_meta": {"io.github.chit/answered": "the prompt was answered in chit"},
}
OUTCOME_RETRY_S = (1.0, 2.0, 5.0, 10.0, 30.0)
_ACTIVE = ("working", "input_required")


class Mirror:
    """Mirrors one receipt into one proxy task (see the module docstring)."""

    def __init__(self, host: ProxyHost, task: TaskContext, receipt_id: str) -> None:
        """Bind the worker to its task and receipt."""
        self.host = host
        self.task_id = task.task_id
        self.rid = receipt_id
        self.rt = host.runtime
        self.sent: set[str] = set()
        self.refused: dict[str, str] = {}
        """Host keys whose answer chit refused (it does not fit the form) → why."""
        self.alias: dict[str, str] = {}
        """Host key → the receipt's key (a refused answer is asked again under a new key)."""
        self.current: dict[str, str] = {}
        self.rounds: dict[str, int] = {}
        self.kept: dict[str, str] = {}
        """Receipt keys of sampling/roots questions kept for the person (the host's
        answer was refused) → why."""
        self.latest: Receipt | None = None
        self.as_sent: dict[str, dict[str, Any] | None] = {}
        """Receipt key → the request the host is asked for that question (read once)."""

    async def run(self) -> Any:
        """Follow the receipt to its end; return the result (or raise the task's error)."""
        sync = self.host.sync_results.pop(self.rid, None)
        if sync is not None:
            return sync
        try:
            receipt = await self._follow()
        except BaseException:
            # However the worker was stopped: a host's tasks/cancel is in the row.
            with anyio.CancelScope(shield=True):
                await self._cancel_if_asked()
            raise
        if receipt.retrieval.is_lost and not receipt.is_terminal:
            raise TaskProtocolError(
                -32603, f"The server no longer knows the task ({receipt.retrieval})"
            )
        if receipt.state is LifecycleState.CANCELLED:
            await self.rt.cancel(self.task_id, "Cancelled on the server")
            raise TaskGone(self.task_id)
        answer = await self._outcome()
        if answer.error is not None:
            raise TaskProtocolError(
                int(answer.error.get("code", -32603)),
                str(answer.error.get("message", "")),
                answer.error.get("data"),
            )
        return answer.result or {"content": []}

    async def _follow(self) -> Receipt:
        try:
            return await self._follow_events()
        except BaseExceptionGroup as group:
            raise unwrap(group) from None

    async def _follow_events(self) -> Receipt:
        async with (
            self.host.backend.receipt_events(self.rid) as stream,
            anyio.create_task_group() as tg,
        ):
            self.latest = await self.host.backend.receipt(self.rid)
            tg.start_soon(self._pump, stream)
            while True:
                receipt = self.latest
                await self._sync(receipt)
                if receipt.is_terminal or receipt.retrieval.is_lost:
                    break
                await self.rt.wait_change(self.task_id)
            tg.cancel_scope.cancel()
        return receipt

    async def _pump(self, stream: Any) -> None:
        async for event in stream:
            self.latest = await newest(self.host, self.rid, self.latest, event)
            self.rt.wake(self.task_id)

    async def _sync(self, receipt: Receipt) -> None:
        row = self.rt.store.get(self.task_id)
        if row is None or row.status not in _ACTIVE:
            raise TaskGone(self.task_id)
        await self._forward_answers(receipt, row.input_responses)
        wanted = await self._prompts(receipt)
        withdraw = {k for k in row.pending_inputs if k not in wanted}
        if withdraw:
            self.sent |= withdraw
            await self.rt.answer(self.task_id, dict.fromkeys(withdraw, ANSWERED_ELSEWHERE))
        # While a refused host answer's question waits for a person, the host's task
        # says so (else it would wait without a word).
        kept = [self.kept[q.key] for q in receipt.pending_inputs if q.key in self.kept]
        message = kept[-1] if kept else receipt.status_message
        if wanted:
            fresh = {k: v for k, v in wanted.items() if k not in row.input_requests}
            if fresh or row.status != "input_required":
                refused = [why for key, why in self.refused.items() if key in row.input_requests]
                await self.rt._set(
                    self.task_id,
                    status="input_required",
                    input_requests={**row.input_requests, **fresh},
                    status_message=(refused[-1] if refused else message) or "Waiting for input",
                )
        elif row.status == "input_required":
            await self.rt._set(self.task_id, status="working", status_message=message or "Working")
        elif message and message != row.status_message:
            await self.rt.set_status_message(self.task_id, message)

    async def _prompts(self, receipt: Receipt) -> dict[str, dict[str, Any]]:
        """The receipt's pending prompts the host may be asked (as stored input requests).

        Each kind goes to a host that declared its capability (elicitation, sampling,
        roots; :mod:`chit.proxy.inputs`). A sampling or roots question whose host answer
        chit refused stays with the person: asking a program again gets the same answer.
        """
        if receipt.state is not LifecycleState.INPUT_REQUIRED:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for q in receipt.pending_inputs:
            if not self.host.may_ask(q.kind) or q.key in self.kept:
                continue
            key = self._host_key(q.key) if q.kind is InputKind.ELICITATION else q.key
            if key in self.sent:
                continue
            request = await self._request(q)
            if request is not None:
                out[key] = request
        return out

    async def _request(self, q: InputRequest) -> dict[str, Any] | None:
        """What the host is asked for ``q``: a sampling question as its server sent it."""
        if q.kind is not InputKind.SAMPLING:
            return host_request(q)
        if q.key not in self.as_sent:  # once: the host is asked it once
            sent = await self.host.backend.question(self.rid, q.key)
            self.as_sent[q.key] = host_request(q, sent)
        return self.as_sent[q.key]

    def _host_key(self, key: str) -> str:
        """The key the host is asked under (a new one after a refused answer)."""
        current = self.current.get(key, key)
        if current in self.refused:
            rounds = self.rounds.get(key, 1) + 1
            self.rounds[key] = rounds
            current = f"{key}~{rounds}"
            self.alias[current] = key
            self.current[key] = current
        return current

    async def _forward_answers(self, receipt: Receipt, responses: dict[str, Any]) -> None:
        for host_key, reply in responses.items():
            key = self.alias.get(host_key, host_key)
            request = receipt.input_request(key)
            if host_key in self.sent or request is None or not request.is_pending:
                continue
            self.sent.add(host_key)
            if not isinstance(reply, dict):
                continue
            try:
                await self.host.backend.answer_for_host(self.rid, key, reply)
            except UsageError as exc:  # it does not fit the form
                log.info("host answer to %s refused: %s", self.rid, exc.message)
                if request.kind is InputKind.ELICITATION:  # a person's form: ask again
                    self.refused[host_key] = f"Answer refused ({exc.message}); asked again"
                else:
                    why = f"Answer refused ({exc.message}); the question waits in chit's inbox"
                    self.kept[key] = why
            except ChitError as exc:  # answered in chit first, or the server went away
                log.info("host answer to %s not delivered: %s", self.rid, exc.message)
                # Still pending (not answered in chit first), it is the person's now
                # (chit.proxy.starts): the host's task says so instead of going quiet.
                why = f"Answer not delivered ({exc.message}); it waits in chit's inbox"
                self.kept[key] = why

    async def _cancel_if_asked(self) -> None:
        row = self.rt.store.get(self.task_id)
        if row is not None and row.cancel_requested:
            try:
                await self.host.backend.cancel(self.rid)
            except ChitError as exc:
                log.info("cancel of %s not sent: %s", self.rid, exc.message)

    async def _outcome(self) -> Any:
        for pause in (*OUTCOME_RETRY_S, None):
            try:
                return await self.host.backend.outcome(self.rid)
            except ChitError as exc:
                if pause is None:
                    message = f"The result cannot be fetched: {exc.message}"
                    raise TaskProtocolError(-32603, message) from exc
                await anyio.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover


async def newest(
    host: ProxyHost, rid: str, latest: Receipt | None, event: EngineEvent
) -> Receipt | None:
    """The receipt after ``event``: its own, or read again after a ``Resync``.

    Never an older one than ``latest``: the changes queued after a subscription starts
    or after a ``Resync`` (events were dropped) may predate the receipt read then, and
    taking one would withdraw from the host a question the read already showed it.
    """
    if isinstance(event, ReceiptUpdate) and event.receipt.receipt_id == rid:
        found = event.receipt
    elif isinstance(event, Resync):
        found = await host.backend.receipt(rid)
    else:
        return latest
    if latest is not None and found.version < latest.version:
        return latest
    return found


def unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What a task group raised: a cancellation first, else the one real error."""
    cancelled, _ = group.split(anyio.get_cancelled_exc_class())
    if cancelled is not None:
        leaf: BaseException = cancelled
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        return leaf
    return sole_error(group)


def is_cancellation(exc: BaseException) -> bool:
    """True for a cancellation, also when task groups wrapped it (and nothing else)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(is_cancellation(e) for e in exc.exceptions)
    return isinstance(exc, anyio.get_cancelled_exc_class())


def mirror_tool(host: ProxyHost) -> Any:
    """The proxy task tool's function (registered with the host's task runtime)."""

    async def mirror(receipt_id: str, task: TaskContext) -> Any:
        return await Mirror(host, task, receipt_id).run()

    return mirror
