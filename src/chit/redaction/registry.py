"""The process-wide registry of opened secrets, and redaction of every log record."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from contextlib import suppress
from typing import Any, Final

from chit.redaction.redactor import MIN_SECRET, NOTHING, Redactor, Secret, handle_secret

_MAX_HANDLES: Final = 100_000
"""Handles the registry remembers (most recent first); older ones fall out."""


class SecretRegistry:
    """Every handle and configuration secret this process opened (thread-safe).

    The reconciler registers each handle it opens, the server resolver each secret it
    opens; :meth:`everything` redacts error messages and log records with all of them.
    """

    def __init__(self, max_handles: int = _MAX_HANDLES) -> None:
        self._lock = threading.Lock()
        self._handles: OrderedDict[str, Secret] = OrderedDict()
        self._servers: dict[str, tuple[Secret, ...]] = {}
        self._max = max_handles
        self._all: Redactor | None = NOTHING
        self._per_server: dict[str, Redactor] = {}

    def remember_handle(self, handle: str, fingerprint: str) -> None:
        """Register a task handle (and make sure log records are redacted)."""
        if len(handle) < MIN_SECRET:
            return
        with self._lock:
            if handle in self._handles:
                self._handles.move_to_end(handle)
                return
            self._handles[handle] = handle_secret(handle, fingerprint)
            while len(self._handles) > self._max:
                self._handles.popitem(last=False)
            self._all = None
        install_log_redaction()

    def remember_server(self, server: str, secrets: Iterable[Secret]) -> None:
        """Register (replace) the configuration secrets of ``server``."""
        kept = tuple(secrets)
        with self._lock:
            if self._servers.get(server) == kept:
                return
            self._servers[server] = kept
            self._per_server.pop(server, None)
            self._all = None
        if kept:
            install_log_redaction()

    def server(self, server: str) -> Redactor:
        """A redactor for the configuration secrets of ``server`` (maybe none)."""
        with self._lock:
            found = self._per_server.get(server)
            if found is None:
                found = Redactor(self._servers.get(server, ()))
                self._per_server[server] = found
            return found

    def everything(self) -> Redactor:
        """A redactor for every handle and secret registered so far."""
        with self._lock:
            found = self._all
            if found is None:
                secrets = [s for group in self._servers.values() for s in group]
                secrets.extend(self._handles.values())
                found = self._all = Redactor(secrets)
            return found

    def clear(self) -> None:
        """Forget everything (tests)."""
        with self._lock:
            self._handles.clear()
            self._servers.clear()
            self._per_server.clear()
            self._all = NOTHING


REGISTRY: Final = SecretRegistry()
"""This process's registry."""


def redact(text: str) -> str:
    """``text`` with every handle and secret this process knows replaced."""
    return REGISTRY.everything().text(text)


_FORMATTER = logging.Formatter()


def redact_record(record: logging.LogRecord) -> None:
    """Redact a log record in place: its message, exception and stack text."""
    redactor = REGISTRY.everything()
    if not redactor:
        return
    message = record.getMessage()
    clean = redactor.text(message)
    if clean != message or record.args:
        record.msg, record.args = clean, None
    if record.exc_info and not record.exc_text:
        record.exc_text = _FORMATTER.formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redactor.text(record.exc_text)
    if record.stack_info:
        record.stack_info = redactor.text(record.stack_info)


class RedactingFilter(logging.Filter):
    """A handler filter that redacts every record it passes (see :func:`redact_record`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record``; never drops it."""
        # A malformed record (bad format arguments): logging reports it itself.
        with suppress(Exception):
            redact_record(record)
        return True


_installed = threading.Event()
_install_lock = threading.Lock()


def install_log_redaction() -> None:
    """Make every log record of this process pass through :func:`redact_record`.

    Installs a log-record factory (idempotent), so records of every logger - chit's, the
    MCP SDK's, httpx's - are redacted whatever handler later writes them. Called by the
    registry the first time a secret is registered.
    """
    if _installed.is_set():
        return
    with _install_lock:
        if _installed.is_set():
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            with suppress(Exception):  # logging must never fail because of redaction
                redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed.set()
