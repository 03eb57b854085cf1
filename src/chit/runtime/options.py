"""How the engine is tuned: waits, timeouts and the lease's rhythm."""

from __future__ import annotations

from dataclasses import dataclass, field

from chit.reconcile import ClientOptions


@dataclass(frozen=True)
class SupervisorOptions:
    """Tuning of the engine (defaults suit the daemon; tests shorten them).

    Attributes:
        client: how connections are made (mode, timeouts, push, concurrency).
        answer_wait_s: how long a 2025 prompt's callback waits for a person's answer.
        redeliver_wait_s: how long a re-opened ``tasks/result`` waits for a pending
            prompt to be re-delivered before it is marked lost.
        intent_grace_s: a ``sending`` intent is never resumed younger than this.
        heartbeat_s: the lease's heartbeat (and a viewer's takeover check).
        lease_stale_s: a lease not refreshed for this long may be taken over.
        settle_s: ``reconcile_once`` waits up to this for 2025 prompts to arrive.
        write_thread: commit the checks' write batches in a worker thread on a second
            connection, so the event loop keeps reading while the disk syncs (False:
            on the loop, as before 2026-12-01; the benchmark's "before").
    """

    client: ClientOptions = field(default_factory=ClientOptions)
    answer_wait_s: float = 300.0
    redeliver_wait_s: float = 10.0
    intent_grace_s: float = 60.0
    heartbeat_s: float = 2.0
    lease_stale_s: float = 10.0
    settle_s: float = 2.0
    write_thread: bool = True
