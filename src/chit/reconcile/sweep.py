"""The one-time redaction sweep: rows written before redaction at the boundary.

Migration 0006 marks a store with older rows (``chit.store.rewrite``); the first process
that unlocks the vault sweeps them: each receipt's document, timeline messages and
intents' errors are redacted with the receipt's redactor (its handle, its server's
secrets). A handle that can no longer be opened - wiped after the task expired, which is
exactly when a server's "not found" quoted it - is still found: every token of the
receipt's texts is fingerprinted with the vault's key and compared with the fingerprint
the receipt kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import unquote

from chit.receipts import Receipt
from chit.reconcile.boundary import redact_receipt
from chit.reconcile.handles import HandleBook
from chit.redaction import MIN_SECRET, REGISTRY, Redactor, Secret, handle_secret
from chit.store import Store

log = logging.getLogger("chit.reconcile")

_TOKEN = re.compile(r"[^\s\"'`<>(){}\[\],;|]+")
_PARTS = re.compile(r"[=:/#@]")
_UNICODE = re.compile(r"\\u([0-9a-fA-F]{4})")


def _views(text: str) -> set[str]:
    once = unquote(text)
    return {text, once, unquote(once), _UNICODE.sub(lambda m: chr(int(m.group(1), 16)), text)}


def _candidates(texts: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for text in texts:
        for view in _views(text):
            for token in _TOKEN.findall(view):
                for piece in (token, *_PARTS.split(token)):
                    piece = piece.strip(".!?*")
                    if len(piece) >= MIN_SECRET:
                        found.add(piece)
    return found


def _texts(receipt: Receipt) -> list[str]:
    texts: list[str | None] = [
        receipt.status_message,
        receipt.retrieval_error,
        receipt.cancel.reason,
    ]
    for q in receipt.input_requests:
        texts += [q.key, q.message, q.url]
    if receipt.outcome is not None:
        texts += [receipt.outcome.summary, receipt.outcome.error_message]
    return [t for t in texts if t]


def lost_handle(receipt: Receipt, texts: Iterable[str], handles: HandleBook) -> Secret | None:
    """The receipt's handle found among ``texts`` by its fingerprint, if it is there."""
    if receipt.handle is None:
        return None
    wanted = receipt.handle.fingerprint
    for candidate in _candidates(texts):
        if handles.vault.fingerprint(candidate) == wanted:
            return handle_secret(candidate, wanted)
    return None


def sweep_existing(store: Store, handles: HandleBook, *, page: int = 200) -> int:
    """Redact every row written before the boundary existed, once; rows changed.

    Does nothing (cheaply) when the store carries no mark.
    """
    rewriter = store.rewriter
    if not rewriter.pending():
        return 0
    digest_key = handles.vault.digest_key()
    changed, after = 0, ""
    while batch := rewriter.page(after, page):
        fixes = []
        for receipt in batch:
            redactor = handles.redactor(receipt)
            if not any(s.marker.startswith("task#") for s in redactor.secrets):
                texts = _texts(receipt) + rewriter.texts(receipt.receipt_id)
                found = lost_handle(receipt, texts, handles)
                if found is not None:
                    redactor = redactor.plus(found)
            fixes.append((receipt, redact_receipt(receipt, redactor, digest_key), redactor.text))
        changed += rewriter.rewrite(fixes)
        after = batch[-1].receipt_id
    everything: Redactor = REGISTRY.everything()
    changed += rewriter.rewrite_orphan_intents(everything.text)
    rewriter.finish()
    log.info("redaction sweep: %d stored texts rewritten", changed)
    return changed
