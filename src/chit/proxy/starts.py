"""Tool calls a proxied host starts: intent first, a receipt when they become tasks.

The host's ``tools/call`` is sent on the engine's session of the server *as it is* (its
arguments, its ``_meta``, on a 2026 multi-round-trip retry its ``inputResponses`` and
``requestState``), with chit's request key added and the intent written before it
leaves, so a crash between send and reply is visible (``chit intents``). The answer is
recorded as ``chit call`` records one — a task gets a receipt (with the host's name and
version, and the sidecar work item its ``_meta`` names), a synchronous answer a
synchronous receipt — and handed back to the proxy as the server sent it.

:meth:`Starts.outcome` fetches a finished task's full result for the host (the receipt
keeps only a digest and a bounded summary): from the server while it still has it,
else the receipt's summary. Handles never leave: the result is redacted first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from chit import clock
from chit.errors import ChitError, Conflict, NotFound, UsageError
from chit.proxy import wire as pwire
from chit.proxy.inputs import CAPABILITY, form_answer
from chit.proxy.models import META_WORK, Answer, StartParams, StartReply
from chit.proxy.upstream import Attachment
from chit.receipts import (
    HostLeft,
    InputKind,
    InputRequest,
    IntentState,
    LifecycleState,
    Receipt,
    TaskProtocol,
    new_intent,
    new_request_key,
)
from chit.redaction import redact
from chit.runtime import Supervisor
from chit.runtime.servers import connect
from chit.servers.tools import ServerUnreachable
from chit.tasks import wire
from chit.tasks.client import SyncReason, SyncResult, TaskClient, TaskError, classify
from chit.tasks.client.parse import parse_call_result, parse_create_2025, parse_create_2026

log = logging.getLogger("chit.proxy")

TOOLS_CALL = "tools/call"
_PASSED_ON = ("inputResponses", "requestState")  # a 2026 multi-round-trip retry


class Starts:
    """Starts, outcomes and departures of proxied calls on one Supervisor."""

    def __init__(self, supervisor: Supervisor) -> None:
        """Record through ``supervisor``'s store, vault and sessions."""
        self.sup = supervisor
        self.holders: dict[str, Attachment] = {}
        """Tasks by the attachment whose host started them (while it may still answer)."""
        self.attached: Callable[[Attachment], bool] = lambda _att: True
        self.refused: dict[str, set[str]] = {}
        """Receipt → keys of sampling/roots questions whose host answer chit refused:
        those are the person's to answer now (the host is not asked them again)."""
        supervisor.answers.host_asks = self.host_asks

    def host_asks(self, receipt: Receipt, request: InputRequest) -> str | None:
        """Why a person may not answer ``request`` in chit now (None: they may).

        With the server's ``prompts = "host"``, an elicitation, sampling or roots
        question of a task whose host started it, is still attached and declared that
        capability is the host's to answer (it is asked there). Once the host gave up
        or went away, or chit refused its answer to a sampling or roots question, chit
        may answer it; with ``both`` the first answer wins, with ``chit`` the host is
        never asked.
        """
        rid = receipt.receipt_id
        att = self.holders.get(rid)
        if att is None:
            return None
        if receipt.is_terminal or not self.attached(att):
            self.holders.pop(rid, None)
            return None
        if att.info is None or att.info.prompts != "host":
            return None
        want = CAPABILITY.get(request.kind)
        if want is None or not getattr(att.params.capabilities, want):
            return None
        if request.key in self.refused.get(rid, ()):
            return None
        return (
            f"this prompt is asked of the host that started the task"
            f' ({att.params.host.label}): server {att.server!r} has prompts = "host".'
            f' Answer it there, or set prompts = "both" to answer in chit too'
        )

    async def start(self, att: Attachment, p: StartParams) -> StartReply:
        """Send a ``tools/call`` that may become a task; see the module docstring.

        Raises:
            ServerUnreachable: no session, or the outcome is unknown (intent kept).
        """
        params = pwire.host_params(p.params)
        tool, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(tool, str) or not isinstance(arguments, dict):
            return _refused("tools/call needs a tool name and an arguments object")
        meta = dict(params.get("_meta") or {})
        work = meta.get(META_WORK)
        work_ref = work if isinstance(work, str) and 0 < len(work) <= 256 else None
        client = await connect(self.sup.pool, att.server)
        calls = self.sup.calls
        host = p.host or att.params.host
        now = clock.now()
        key = new_request_key(now)
        meta[wire.META_REQUEST_KEY] = key
        intent = new_intent(
            request_key=key,
            server=att.server,
            tool=tool,
            args_digest=calls.arguments_digest(arguments),
            now=now,
            purpose=f"started by {host.label} through chit proxy",
            work_ref=work_ref,
        )
        owner = calls.owner
        # On the wire from now on for intent recovery (as ``Calls.call``): a heartbeat
        # while the intent waits for its group commit must not take it for an orphan's.
        calls.sending.add(key)
        try:
            # Durable before the request leaves, committed off the loop (a FULL-sync
            # commit on it held every other host's and server's traffic for an fsync).
            await calls.writer.group.run(lambda store: store.intents.begin(intent, owner=owner))
        except BaseException:
            calls.sending.discard(key)
            raise
        try:
            raw, reason = await self._send(client, tool, arguments, meta, params, p)
        except Exception as exc:
            err = classify(exc, TOOLS_CALL)
            if err.failure_class == "transient":
                self.sup.pool.broken(att.server, client)
                await calls.mark_intent(key, IntentState.UNKNOWN, redact(str(err))[:300])
                raise ServerUnreachable(
                    f"the call's outcome is unknown ({err.message}); see 'chit intents'"
                ) from exc
            await calls.mark_intent(key, IntentState.REJECTED, redact(str(err))[:300])
            if isinstance(exc, MCPError):
                return StartReply(kind="error", error=_error(exc))
            return _refused(f"the server's answer cannot be read: {err.message}")
        finally:
            calls.sending.discard(key)
        try:
            started = self._started(client.generation, raw, reason)
        except TaskError as exc:
            await calls.mark_intent(key, IntentState.UNKNOWN, redact(str(exc))[:300])
            return _refused(f"the server's answer cannot be read: {exc.message}")
        if started is None:
            await calls.mark_intent(
                key,
                IntentState.REJECTED,
                "the server asked for input before creating anything; the host "
                "answers and calls again",
            )
            return StartReply(kind="input_required", result=raw)
        receipt = await calls.record_started(intent, started, host=host)
        if isinstance(started, SyncResult):
            return StartReply(kind="sync", receipt=receipt, result=raw)
        for rid, holder in list(self.holders.items()):
            if not self.attached(holder):
                del self.holders[rid]  # its proxy went away: chit may answer its prompts
        self.holders[receipt.receipt_id] = att
        return StartReply(kind="task", receipt=receipt)

    async def _send(
        self,
        client: TaskClient,
        tool: str,
        arguments: dict[str, Any],
        meta: dict[str, Any],
        params: dict[str, Any],
        p: StartParams,
    ) -> tuple[dict[str, Any], SyncReason]:
        body: dict[str, Any] = {"name": tool, "arguments": arguments, "_meta": meta}
        gen = client.generation
        timeout = client.read_timeout
        reason = SyncReason.SERVER_CHOSE_SYNC
        if gen == wire.PROTOCOL_2025:
            if await client.task_support(tool) == "forbidden":
                reason, timeout = SyncReason.TOOL_FORBIDS_TASKS, client.result_timeout
            else:
                body["task"] = wire.TaskMetadata2025(ttl=p.ttl_ms).wire()
        elif gen == wire.PROTOCOL_2026:
            body.update({k: params[k] for k in _PASSED_ON if k in params})
            if not p.declare_extension:
                timeout = client.result_timeout
        else:
            reason, timeout = SyncReason.NO_TASKS_CAPABILITY, client.result_timeout
            body.update({k: params[k] for k in _PASSED_ON if k in params})
        data: dict[str, Any] = {"method": TOOLS_CALL, "params": body}
        opts: dict[str, Any] = {}
        client.session._stamp(data, opts)  # type: ignore[arg-type]
        if not p.declare_extension:
            pwire.undeclare_extension(data["params"])
        opts["timeout"] = timeout
        raw = await client.session._dispatcher.send_raw_request(
            TOOLS_CALL,
            data["params"],
            opts,  # type: ignore[arg-type]
        )
        return raw, reason

    @staticmethod
    def _started(
        gen: str | None, raw: dict[str, Any], reason: SyncReason
    ) -> Any:  # TaskHandle | SyncResult | None
        if gen == wire.PROTOCOL_2025 and "task" in raw:
            return parse_create_2025(raw, TOOLS_CALL)
        if raw.get("resultType") == "task":
            return parse_create_2026(raw, TOOLS_CALL)
        if raw.get("resultType") == "input_required":
            return None
        return SyncResult(parse_call_result(raw, TOOLS_CALL), reason)

    # --- after the start ----------------------------------------------------------------

    async def outcome(self, receipt_id: str) -> Answer:
        """The full result (or JSON-RPC error) of a finished task, redacted.

        Raises:
            NotFound: no such receipt. Conflict: it has not finished yet.
            ServerUnreachable: the server cannot be reached to fetch it.
        """
        receipt = self.sup.store.receipts.get(receipt_id)
        if receipt is None:
            raise NotFound(f"no receipt {receipt_id}")
        if not receipt.is_terminal:
            raise Conflict(f"receipt {receipt_id} has not finished ({receipt.state})")
        self.holders.pop(receipt_id, None)  # nothing left to ask: forget who started it
        self.refused.pop(receipt_id, None)
        if receipt.state is LifecycleState.CANCELLED:
            return Answer(error={"code": INVALID_PARAMS, "message": "The task was cancelled"})
        if receipt.protocol is TaskProtocol.SYNC or receipt.handle is None:
            return _summary(receipt)
        client = await connect(self.sup.pool, receipt.server)
        task_id = self.sup.handles.task_id(receipt)
        try:
            outcome = await client.result(task_id, timeout=self.sup.pool.options.read_timeout)
        except TaskError as exc:
            if exc.failure_class == "transient":
                raise ServerUnreachable(f"cannot fetch the result: {exc.message}") from exc
            log.info("result of %s no longer on the server: %s", receipt_id, exc.failure_class)
            return _summary(receipt)
        redactor = self.sup.handles.redactor(receipt)
        if outcome.error is not None:
            error = outcome.error.model_dump(by_alias=True, mode="json", exclude_none=True)
            return Answer(error=redactor.value(error))
        if outcome.result is None:
            return _summary(receipt)
        # As the server sent it (fields it left out stay out), without its related-task
        # _meta: that names the server's handle; the host's own task carries chit's id.
        result = outcome.result.model_dump(by_alias=True, mode="json", exclude_unset=True)
        meta = dict(result.pop("_meta", None) or {})
        meta.pop(wire.META_RELATED_TASK, None)
        if meta:
            result["_meta"] = meta
        return Answer(result=redactor.value(result))

    async def answer(self, receipt_id: str, key: str, reply: dict[str, Any]) -> Receipt:
        """Pass the host's reply to a prompt on: the first answer wins.

        An elicitation's reply goes as given (the server judges it). A sampling or
        roots result becomes the form answer a person gives (:func:`form_answer`) and
        is checked as a person's is (a roots answer shares only ``file://`` URIs); a
        refused one stays in chit's inbox for the person, the host is not asked again.
        Any answer that could not be delivered while its question stays pending leaves
        the question to the person too (:meth:`host_asks`).

        Raises:
            UsageError: not a result of its request, or refused. Conflict: nothing
                pending under ``key`` (e.g. answered in chit first).
        """
        stored = self.sup.store.receipts.get(receipt_id)
        request = stored.input_request(key) if stored is not None else None
        kind = request.kind if request is not None else InputKind.ELICITATION
        form = kind in (InputKind.SAMPLING, InputKind.ROOTS)
        try:
            return await self._pass_on(receipt_id, key, kind, reply)
        except UsageError as exc:
            if form and request is not None and request.is_pending:
                self._to_person(receipt_id, key, f"{kind.value} answer refused", exc)
            raise
        except ChitError as exc:
            # Not delivered (the server unreachable, or its request gone): a question still
            # pending is the person's now. The host holds its answer as given and is not
            # asked again, so leaving it the host's would leave it to nobody.
            after = self.sup.store.receipts.get(receipt_id)
            still = after.input_request(key) if after is not None else None
            if after is not None and not after.is_terminal and still and still.is_pending:
                self._to_person(receipt_id, key, "answer not delivered", exc)
            raise

    async def _pass_on(
        self, receipt_id: str, key: str, kind: InputKind, reply: dict[str, Any]
    ) -> Receipt:
        form = kind in (InputKind.SAMPLING, InputKind.ROOTS)
        reply = form_answer(kind, reply)
        action = reply.get("action")
        content = reply.get("content")
        if action == "accept":
            return await self.sup.answers.answer(
                receipt_id,
                key,
                content if isinstance(content, dict) else {},
                validate=form,
                by_host=True,
            )
        return await self.sup.answers.answer(
            receipt_id,
            key,
            None,
            decline=action == "decline",
            cancel=action != "decline",
            by_host=True,
        )

    def _to_person(self, receipt_id: str, key: str, what: str, exc: ChitError) -> None:
        """The host's answer to ``key`` did not get through: a person may answer it now."""
        self.refused.setdefault(receipt_id, set()).add(key)
        log.info(
            "host's %s (question %s of %s: %s): it waits in chit's inbox",
            what,
            key,
            receipt_id,
            exc.message,
        )

    async def gave_up(self, att: Attachment, receipt_id: str, why: str) -> Receipt:
        """The host stopped waiting for a task it started: note it; cancel if configured."""
        self.holders.pop(receipt_id, None)  # its prompts are chit's to answer now
        receipt = self.sup.writer.apply(receipt_id, [HostLeft(why=why)])
        spec_cancel = att.info.host_cancel if att.info is not None else "confirm"
        if spec_cancel == "cancel" and not receipt.is_terminal:
            receipt = await self.sup.cancel(receipt_id)
        return receipt


def _summary(receipt: Receipt) -> Answer:
    """What chit kept of a result: its bounded summary (or the error)."""
    out = receipt.outcome
    if out is None:
        return Answer(error={"code": -32603, "message": "chit kept no result for this task"})
    if out.error_code is not None:
        return Answer(error={"code": out.error_code, "message": out.error_message or ""})
    text = out.summary or "(the server no longer has the result; chit kept no summary)"
    return Answer(result={"content": [{"type": "text", "text": text}], "isError": out.is_error})


def _error(exc: MCPError) -> dict[str, Any]:
    return exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)


def _refused(message: str) -> StartReply:
    return StartReply(kind="error", error={"code": INVALID_PARAMS, "message": message})


__all__ = ["Starts"]
