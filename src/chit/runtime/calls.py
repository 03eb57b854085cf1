"""Calls: the intent first, then the request, then the receipt when the server accepts.

The intent is committed before the request leaves; the receipt, its sealed handle and
its first observation are committed in one transaction when the server accepts. A reply
that never comes leaves the intent ``unknown`` (see :mod:`chit.runtime.intents`).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from chit.clock import Clock, current_clock
from chit.errors import NotFound, UsageError
from chit.receipts import (
    HandleRef,
    HostInfo,
    Intent,
    IntentState,
    Observation,
    ObservationSource,
    Receipt,
    TaskProtocol,
    args_digest,
    new_intent,
    new_request_key,
    open_receipt,
    sync_receipt,
)
from chit.receipts.acceptance import parse_check
from chit.reconcile import (
    ConnectionPool,
    HandleBook,
    ReceiptWriter,
    acceptance_event,
    handle_aad,
    result_event,
    result_json,
    status_event,
)
from chit.reconcile.boundary import redact_event
from chit.redaction import REGISTRY, handle_secret, redact
from chit.runtime.arguments import argument_problems, plain
from chit.runtime.servers import connect, typed_error
from chit.servers.tools import ServerUnreachable
from chit.store import AlreadyExists, Store
from chit.tasks import wire
from chit.tasks.client import SyncResult, TaskClient, TaskError, TaskHandle


def check_expression(accept_if: str | None) -> None:
    """Refuse an unreadable acceptance expression before anything is sent."""
    if accept_if is not None:
        try:
            parse_check(accept_if)
        except ValueError as exc:
            raise UsageError(f"--accept-if: {exc}") from exc


class Calls:
    """Starts tool calls as tasks and records what the servers answered.

    ``sending`` is the set of request keys this Supervisor has on the wire right now;
    intent recovery shares it so it never declares its own in-flight call unknown.
    """

    def __init__(
        self,
        store: Store,
        pool: ConnectionPool,
        handles: HandleBook,
        writer: ReceiptWriter,
        *,
        owner: str,
        sending: set[str],
        clock: Clock | None = None,
        on_task: Callable[[Receipt, str], None] | None = None,
    ) -> None:
        """Wire the parts; ``owner`` is recorded on every intent this process sends.

        ``on_task`` hears every task receipt created here with its task id (the
        reconciler subscribes to its pushes at once: ``Reconciler.adopt``).
        """
        self.clock = clock or current_clock()
        self.store = store
        self.pool = pool
        self.handles = handles
        self.writer = writer
        self.owner = owner
        self.sending = sending
        self.on_task = on_task

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
        """Call ``tool`` on ``server`` as a task; return its receipt (see the module doc).

        Raises:
            UsageError: bad acceptance expression. NotFound: unknown server.
            ServerUnreachable: no connection, or the outcome is unknown (intent kept).
            ServerProtocolError: the server refused the call.
        """
        check_expression(accept_if)
        args = dict(arguments or {})
        # Connect and check first: nothing is recorded for a call that cannot be made.
        client = await connect(self.pool, server)
        await self._check(client, server, tool, args)
        now = self.clock.now()
        intent = new_intent(
            request_key=new_request_key(now),
            server=server,
            tool=tool,
            args_digest=self.arguments_digest(args),
            now=now,
            purpose=purpose,
            work_ref=work_ref,
        )
        owner, key = self.owner, intent.request_key
        # On the wire from now on for intent recovery, which must never take this call's
        # intent for an orphan's while the intent or its acceptance waits for a group
        # commit (a heartbeat between the two would mark it unknown under the call).
        self.sending.add(key)
        try:
            # Durable before the request leaves: committed (in a group, off the loop) first.
            await self.writer.group.run(lambda store: store.intents.begin(intent, owner=owner))
            return await self.send(intent, args, ttl_ms=ttl_ms, accept_if=accept_if)
        finally:
            self.sending.discard(key)

    async def _check(
        self, client: TaskClient, server: str, tool: str, arguments: dict[str, Any]
    ) -> None:
        """Refuse an unknown tool (exit 3, naming the real ones) or unfit arguments (exit 2)."""
        try:
            info = await client.tool(tool)
        except TaskError as exc:
            if exc.failure_class == "transient":
                self.pool.broken(server, client)
            raise typed_error(exc, f"server {server!r} did not list its tools") from exc
        if info is None:
            names = client.tool_names()
            shown = ", ".join(plain(n, 60) for n in names[:40]) + (" …" if len(names) > 40 else "")
            raise NotFound(
                f"server {server!r} has no tool {plain(tool)!r}; "
                + (f"its tools: {shown}" if names else "it lists no tools")
            )
        problems = argument_problems(info.input_schema, arguments)
        if problems:
            raise UsageError(
                f"the arguments do not fit the input schema of {server}/{plain(tool)}"
                f" ({len(problems)} problem{'s' if len(problems) != 1 else ''}):",
                details=problems,
            )

    async def send(
        self,
        intent: Intent,
        arguments: dict[str, Any],
        *,
        ttl_ms: int | None,
        accept_if: str | None,
    ) -> Receipt:
        """Send a stored ``sending`` intent and record what the server answered."""
        key = intent.request_key
        self.sending.add(key)  # until its acceptance is recorded (see ``call``)
        try:
            client = await connect(self.pool, intent.server)
            try:
                started = await client.start(intent.tool, arguments, request_key=key, ttl_ms=ttl_ms)
            except TaskError as exc:
                if exc.failure_class == "transient":
                    self.pool.broken(intent.server)
                    await self.mark_intent(key, IntentState.UNKNOWN, redact(str(exc))[:300])
                    raise ServerUnreachable(
                        f"the call's outcome is unknown ({exc.message}); see 'chit intents' "
                        f"to retry {key} with the same request key or abandon it"
                    ) from exc
                await self.mark_intent(key, IntentState.REJECTED, redact(str(exc))[:300])
                raise typed_error(exc, "the server refused the call") from exc
            return await self.record_started(intent, started, accept_if=accept_if)
        finally:
            self.sending.discard(key)

    async def mark_intent(self, key: str, state: IntentState, error: str) -> None:
        """Move intent ``key`` to ``state``, committed off the loop in the writer's group."""
        await self.writer.group.run(lambda store: store.intents.mark(key, state, error=error))

    async def record_started(
        self,
        intent: Intent,
        started: TaskHandle | SyncResult,
        *,
        accept_if: str | None = None,
        host: HostInfo | None = None,
    ) -> Receipt:
        """Record what the server answered to a sent intent: a task or a synchronous result.

        An accepted task (the common case) commits off the loop, in a group with other
        calls' acceptances: a ``synchronous=FULL`` commit on the loop would stall every
        other session the daemon serves for its fsync. ``host`` names the agent host that
        started the call through ``chit proxy``.
        """
        if isinstance(started, TaskHandle):
            return await self._record_task(intent, started, accept_if, host)
        return self._record_sync(intent, started, accept_if, host)

    def _record_sync(
        self,
        intent: Intent,
        started: SyncResult,
        accept_if: str | None,
        host: HostInfo | None,
    ) -> Receipt:
        """Record a synchronous result (rare: committed on the loop)."""
        now = self.clock.now()
        # The receipt's id is its request key: the store's primary key then answers
        # "the receipt of this request" too, one index fewer per receipt write (0009).
        rid = intent.request_key
        digest_key = self.handles.vault.digest_key()
        result = result_event(started.result, None, digest_key=digest_key)
        tr = sync_receipt(
            intent,
            receipt_id=rid,
            result=redact_event(result, REGISTRY.server(intent.server), digest_key),
            now=now,
            not_task_reason=started.reason.value,
            acceptance_check=accept_if,
            acceptance_required=accept_if is not None,
        )
        first = tr.receipt if host is None else tr.receipt.model_copy(update={"host": host})
        receipt, new = self._record(intent, first, tr.observation, None, None)
        verdict = acceptance_event(receipt, result_json(started.result))
        if verdict is not None and new:
            receipt = self.writer.apply(rid, [verdict])
        return receipt

    async def _record_task(
        self,
        intent: Intent,
        handle: TaskHandle,
        accept_if: str | None,
        host: HostInfo | None = None,
    ) -> Receipt:
        """An accepted task's receipt, its acceptance committed through the writer's group."""
        rid = intent.request_key
        first, observation, blob, fp = self._task_receipt(intent, handle, rid, accept_if, host)
        try:
            stored = await self.writer.group.run(
                lambda store: store.receipts.record_acceptance(
                    intent, first, observation, blob, fp
                ),
                then=lambda stored: self.writer.notify(None, stored, ("receipt",)),
            )
        except AlreadyExists:
            existing = self._already_recorded(intent)
            if existing is None:
                raise
            receipt, new = existing, False
        else:
            receipt, new = stored, True
        return self._started_task(receipt, handle, new)

    def _started_task(self, receipt: Receipt, handle: TaskHandle, new: bool) -> Receipt:
        self.handles.remember(receipt.receipt_id, handle.task_id)
        if self.on_task is not None and new:
            self.on_task(receipt, handle.task_id)
        return receipt

    def _task_receipt(
        self,
        intent: Intent,
        handle: TaskHandle,
        rid: str,
        accept_if: str | None,
        host: HostInfo | None,
    ) -> tuple[Receipt, Observation, bytes, str]:
        """The new receipt of an accepted task, its first observation, sealed handle and
        fingerprint (nothing written)."""
        vault = self.handles.vault
        blob = vault.seal(handle.task_id, handle_aad(rid, intent.server))
        fp = vault.fingerprint(handle.task_id)
        protocol = (
            TaskProtocol.LEGACY
            if handle.generation == wire.PROTOCOL_2025
            else TaskProtocol.EXTENSION
        )
        # The creating reply is server text like any other: redacted before it is kept.
        redactor = REGISTRY.server(intent.server).plus(handle_secret(handle.task_id, fp))
        created = redact_event(
            status_event(handle, ObservationSource.CREATE), redactor, vault.digest_key()
        )
        tr = open_receipt(
            intent,
            receipt_id=rid,
            protocol=protocol,
            created=created,
            now=self.clock.now(),
            handle=HandleRef(fingerprint=fp, key_id=vault.kid.hex()),
            acceptance_check=accept_if,
            acceptance_required=accept_if is not None,
        )
        first = tr.receipt if host is None else tr.receipt.model_copy(update={"host": host})
        return first, tr.observation, blob, fp

    def _record(
        self,
        intent: Intent,
        receipt: Receipt,
        observation: Observation,
        blob: bytes | None,
        fp: str | None,
    ) -> tuple[Receipt, bool]:
        """Store the new receipt; the one already stored for its request key, if any.

        Returns:
            The stored receipt, and whether this call created it (the ids cannot tell:
            a receipt's id is its request key).
        """
        try:
            stored = self.store.receipts.record_acceptance(intent, receipt, observation, blob, fp)
        except AlreadyExists:
            existing = self._already_recorded(intent)
            if existing is None:
                raise
            return existing, False
        self.writer.notify(None, stored, ("receipt",))
        return stored, True

    def _already_recorded(self, intent: Intent) -> Receipt | None:
        """An idempotent retry answered with the task we already hold a receipt for
        (marks the intent accepted); None when no receipt of its request key exists."""
        existing = self.store.receipts.by_request_key(intent.request_key)
        if existing is None:
            return None
        self.store.intents.mark(
            intent.request_key, IntentState.ACCEPTED, receipt_id=existing.receipt_id
        )
        return existing
