"""Opening sealed task handles, and the reverse map hints and prompts are routed by.

A task id is a bearer secret: it is opened only in memory, when a request needs it, and
never logged. The reverse map (task id → receipt id) lets a status notification or a
2025 elicitation find its receipt. Every handle opened or sealed here is registered with
``chit.redaction.REGISTRY``, so error messages and log records of this process never
show it, and :meth:`HandleBook.redactor` gives the writer what to redact a receipt's
server text with.
"""

from __future__ import annotations

from chit.errors import ChitError, ExitCode
from chit.receipts import Receipt
from chit.redaction import REGISTRY, Redactor, handle_secret
from chit.store import Store
from chit.vault import HandleDecryptError, Vault, aad_for

PRINCIPAL = ""
"""The principal the handle is bound to (chit has one local user today)."""


class HandleUnavailable(ChitError):
    """The receipt's handle was wiped or does not open with this vault (exit 4)."""

    exit_code = ExitCode.KEY_STORE


def handle_aad(receipt_id: str, server: str) -> bytes:
    """The associated data a receipt's sealed handle is bound to."""
    return aad_for(receipt_id, server, PRINCIPAL)


class HandleBook:
    """Opens handles with the vault, caching the plaintext only in process memory."""

    def __init__(self, store: Store, vault: Vault) -> None:
        """Open handles of ``store`` with ``vault``."""
        self._store = store
        self.vault = vault
        self._by_receipt: dict[str, str] = {}
        self._by_task: dict[str, str] = {}
        self._redactors: dict[str, tuple[Redactor, Redactor]] = {}

    def remember(self, receipt_id: str, task_id: str) -> None:
        """Record a handle just sealed (saves opening it again)."""
        self._by_receipt[receipt_id] = task_id
        self._by_task[task_id] = receipt_id
        REGISTRY.remember_handle(task_id, self.vault.fingerprint(task_id))

    def task_id(self, receipt: Receipt) -> str:
        """Return the receipt's task id.

        Raises:
            HandleUnavailable: no sealed handle, or it does not open.
        """
        known = self._by_receipt.get(receipt.receipt_id)
        if known is not None:
            return known
        blob = self._store.receipts.handle_blob(receipt.receipt_id)
        return self.open(receipt.receipt_id, receipt.server, blob)

    def open(self, receipt_id: str, server: str, blob: bytes | None) -> str:
        """Open a receipt's sealed handle (read beforehand) and remember it.

        Raises:
            HandleUnavailable: no sealed handle, or it does not open.
        """
        known = self._by_receipt.get(receipt_id)
        if known is not None:
            return known
        if blob is None:
            raise HandleUnavailable("the sealed task handle was wiped; the task cannot be checked")
        try:
            task_id = self.vault.open(blob, handle_aad(receipt_id, server))
        except HandleDecryptError as exc:
            raise HandleUnavailable(f"the sealed task handle does not open: {exc.message}") from exc
        self.remember(receipt_id, task_id)
        return task_id

    def redactor(self, receipt: Receipt) -> Redactor:
        """What server text about ``receipt`` is redacted with.

        Its task handle (as ``task#<fingerprint>``) and the sealed secrets of its server;
        only the server's secrets when the handle is gone (wiped, or a synchronous call).
        """
        secrets = REGISTRY.server(receipt.server)
        cached = self._redactors.get(receipt.receipt_id)
        if cached is not None and cached[0] is secrets:
            return cached[1]  # the server's secrets did not change since
        try:
            task_id = self.task_id(receipt)
        except HandleUnavailable:
            return secrets
        fingerprint = (
            receipt.handle.fingerprint
            if receipt.handle is not None
            else self.vault.fingerprint(task_id)
        )
        redactor = secrets.plus(handle_secret(task_id, fingerprint))
        self._redactors[receipt.receipt_id] = (secrets, redactor)
        return redactor

    def receipt_for(self, task_id: str) -> str | None:
        """The receipt a task id belongs to, if this process opened or sealed it."""
        return self._by_task.get(task_id)
