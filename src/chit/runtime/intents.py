"""Intent recovery: in-flight calls whose sender died become ``unknown``; retry or abandon.

An intent is its sender's in-flight call while that process lives (a synchronous call
may wait for its reply up to ``result_timeout``): it is resumed only once its recorded
owner is gone (:mod:`chit.runtime.owners`), and never before ``intent_grace_s``.
"""

from __future__ import annotations

from typing import Any

from chit.clock import Clock, current_clock
from chit.errors import Conflict, NotFound, UsageError
from chit.receipts import IntentState, Receipt
from chit.runtime import owners
from chit.runtime.calls import Calls, check_expression
from chit.runtime.events import EventBus, IntentUnknown
from chit.runtime.servers import connect
from chit.store import Store
from chit.store.intent_repo import RESTART_MESSAGE


class IntentRecovery:
    """Resumes, retries and abandons the intents of one home."""

    def __init__(
        self,
        store: Store,
        calls: Calls,
        bus: EventBus,
        *,
        token: str,
        grace_s: float,
        remote_wait_s: float,
        clock: Clock | None = None,
    ) -> None:
        """Wire the parts.

        Args:
            store: the home's store.
            calls: sends a retried intent (and knows which keys are on the wire now).
            bus: hears ``IntentUnknown``.
            token: this Supervisor's owner token (``chit.runtime.owners``).
            grace_s: a ``sending`` intent younger than this is never resumed.
            remote_wait_s: how long a sender on another host is presumed waiting.
            clock: judges the intents' ages.
        """
        self.clock = clock or current_clock()
        self.store = store
        self.calls = calls
        self.bus = bus
        self.token = token
        self.grace_s = grace_s
        self.remote_wait_s = remote_wait_s

    def resume(self) -> int:
        """Restart rule: ``sending`` intents of dead processes become ``unknown``.

        An intent that moved on meanwhile (a lost race) is skipped. Returns how many
        intents became ``unknown``.
        """
        now = self.clock.now()
        count = 0
        senders = self.store.intents.owners(IntentState.SENDING)
        for intent in self.store.intents.list(IntentState.SENDING):
            if intent.request_key in self.calls.sending:
                continue
            age = (now - intent.updated_at).total_seconds()
            if age < self.grace_s:
                continue
            gone = owners.owner_gone(
                senders.get(intent.request_key),
                mine=self.token,
                age_s=age,
                remote_wait_s=self.remote_wait_s,
            )
            if not gone:
                continue
            try:
                marked = self.store.intents.mark(
                    intent.request_key,
                    IntentState.UNKNOWN,
                    error=RESTART_MESSAGE,
                    expected=IntentState.SENDING,
                )
            except Conflict:
                continue
            self.bus.publish(IntentUnknown(marked))
            count += 1
        return count

    async def retry(
        self,
        request_key: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """Re-send an ``unknown`` intent under the same request key.

        A server that honours request keys (chit's own) answers with the task it may
        already have created, so the retry cannot start the work twice. The arguments
        are not stored (only their digest): give them again; they must match.

        Raises:
            NotFound: no such intent. Conflict: the intent is not ``unknown`` (also
            when another process moved it first). UsageError: the arguments differ.
        """
        check_expression(accept_if)
        intent = self.store.intents.get(request_key)
        if intent is None:
            raise NotFound(f"no intent {request_key}")
        if intent.state is not IntentState.UNKNOWN:
            raise Conflict(f"intent {request_key} is {intent.state}; only unknown intents retry")
        args = dict(arguments or {})
        if not self.calls.same_arguments(args, intent.args_digest):
            raise UsageError("the arguments differ from the original call (digest mismatch)")
        await connect(self.calls.pool, intent.server)
        sending = self.store.intents.mark(
            request_key,
            IntentState.SENDING,
            bump_attempts=True,
            expected=IntentState.UNKNOWN,
            owner=self.calls.owner,
        )
        return await self.calls.send(sending, args, ttl_ms=ttl_ms, accept_if=accept_if)

    def abandon(self, request_key: str) -> None:
        """Give up on an ``unknown`` intent (the work may or may not have started).

        Raises:
            NotFound: no such intent. Conflict: the intent is not ``unknown``.
        """
        intent = self.store.intents.get(request_key)
        if intent is None:
            raise NotFound(f"no intent {request_key}")
        if intent.state is not IntentState.UNKNOWN:
            raise Conflict(f"intent {request_key} is {intent.state}; only unknown intents abandon")
        self.store.intents.mark(
            request_key,
            IntentState.ABANDONED,
            error="abandoned by the user",
            expected=IntentState.UNKNOWN,
        )
