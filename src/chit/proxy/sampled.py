"""A task's sampling question as the server asked it, for the host (``proxy.question``).

chit stores a server's ``sampling/createMessage`` as a form a person answers: the
conversation as a bounded, redacted transcript (:mod:`chit.reconcile.questions`). A
host that can sample is asked the server's own request instead — its message list,
system prompt, model preferences, temperature, stop sequences, ``maxTokens``,
``includeContext`` and ``metadata`` — read where it lives while its question is open,
never from the store:

* a 2025 task's request is open on chit's ``tasks/result``: the engine's inbox keeps
  its params in memory exactly as long (:meth:`LegacyInbox.server_request`);
* a 2026 task's is in the task's ``inputRequests``: read again from the server.

Only the receipt's redactor is applied (its task handle and its server's sealed
secrets, as at the store's boundary) and the server's ``_meta`` left out. None when the
request is not at hand (the daemon restarted and the server has not re-delivered it,
it is too large to keep, the server cannot be reached): the proxy then asks from the
stored copy (:func:`chit.proxy.inputs.host_request`).
"""

from __future__ import annotations

import logging
from typing import Any

from chit.errors import ChitError
from chit.proxy.inputs import SAMPLING
from chit.receipts import InputKind, Receipt, TaskProtocol
from chit.reconcile import questions
from chit.reconcile.boundary import server_key
from chit.runtime import Supervisor
from chit.runtime.servers import connect
from chit.tasks.client import TaskError

log = logging.getLogger("chit.proxy")


async def server_request(sup: Supervisor, receipt_id: str, key: str) -> dict[str, Any] | None:
    """The server's sampling request behind question ``key``, redacted (method, params).

    None when the question is not a pending sampling question of a live task, or its
    request is not at hand (see the module docstring).
    """
    receipt = sup.store.receipts.get(receipt_id)
    if receipt is None or receipt.is_terminal:
        return None
    question = receipt.input_request(key)
    if question is None or not question.is_pending or question.kind is not InputKind.SAMPLING:
        return None
    if receipt.protocol is TaskProtocol.LEGACY:
        params = sup.inbox.server_request(receipt_id, key)
    elif receipt.protocol is TaskProtocol.EXTENSION:
        params = await _read_again(sup, receipt, key)
    else:
        params = None
    if params is None:
        return None
    return {"method": SAMPLING, "params": sup.handles.redactor(receipt).value(params)}


async def _read_again(sup: Supervisor, receipt: Receipt, key: str) -> dict[str, Any] | None:
    """A 2026 task's request under stored ``key``, from the server's ``inputRequests``."""
    try:
        client = await connect(sup.pool, receipt.server)
        snap = await client.get(sup.handles.task_id(receipt))
    except (ChitError, TaskError) as exc:
        log.info("sampling request of %s not read again: %s", receipt.receipt_id, exc)
        return None
    found = server_key(key, snap.input_requests, sup.handles.vault.digest_key())
    request = snap.input_requests.get(found) if found is not None else None
    return questions.sampling_params(request) if request is not None else None


__all__ = ["server_request"]
