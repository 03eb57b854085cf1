"""A stdio server's stray stdout: every line that is not MCP, counted, logged, summarised.

Some servers print a banner or debug output on stdout, the channel MCP owns. The mcp SDK
skips such a line but logs it with ``logger.exception`` — an 11-line traceback quoting
the line on the terminal, for every line, even when the call succeeds. chit catches that
record where the SDK emits it (a filter on the ``mcp.client.stdio`` logger), so:

* the SDK's traceback never reaches a terminal;
* each line is written, truncated and escaped, to the server's own log (the file its
  stderr goes to, when chit gave it one);
* when the connection closes, one warning says how many lines were ignored.

chit's own stdio transport (:mod:`chit.tasks.client.pipes`, POSIX on asyncio) records
each such line on its :class:`StdoutNoise` directly. With the SDK's transport (elsewhere),
which connection a record belongs to is known through a context variable: the SDK's
stdout reader task is started inside :func:`counted_stdio`, so it inherits the counter.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TextIO

SDK_LOGGER = "mcp.client.stdio"
_SDK_MESSAGE = "Failed to parse JSONRPC message"
MAX_LOGGED_CHARS = 200

log = logging.getLogger("chit.tasks.client.stdio")


@dataclass
class StdoutNoise:
    """Lines a stdio server wrote on stdout that were not MCP messages.

    Attributes:
        label: How messages name the server (its registry name, or its command).
        sink: Where each line is logged (the server's log file), or None.
        count: How many lines were ignored so far.
    """

    label: str
    sink: TextIO | None = None
    count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, line: str) -> None:
        """Count one ignored line and write it, escaped and truncated, to the sink."""
        with self._lock:
            self.count += 1
        if self.sink is None:
            return
        shown = repr(line[:MAX_LOGGED_CHARS]) + (" …" if len(line) > MAX_LOGGED_CHARS else "")
        with suppress(OSError, ValueError):  # a closed or broken log must not break the call
            self.sink.write(f"[chit] stdout line that is not MCP, ignored: {shown}\n")
            self.sink.flush()

    def summary(self) -> str | None:
        """One line for the user, or None when the server kept stdout clean."""
        if not self.count:
            return None
        lines = "line" if self.count == 1 else "lines"
        where = "; logged with its stderr" if self.sink is not None else ""
        return (
            f"server {self.label} wrote {self.count} {lines} on stdout that "
            f"{'is' if self.count == 1 else 'are'} not MCP (ignored{where})"
        )


_current: ContextVar[StdoutNoise | None] = ContextVar("chit_stdout_noise", default=None)


def _offending_line(record: logging.LogRecord) -> str:
    exc = record.exc_info[1] if record.exc_info else None
    errors = getattr(exc, "errors", None)
    if callable(errors):
        with suppress(Exception):
            found: list[dict[str, Any]] = errors()
            if found:
                value = found[0].get("input")
                return value if isinstance(value, str) else json.dumps(value, default=str)
    return "<unparsable line>"


class _SdkParseFailure(logging.Filter):
    """Turns the SDK's per-line traceback into a count and a line in the server's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_SDK_MESSAGE):
            return True
        noise = _current.get()
        if noise is not None:
            noise.record(_offending_line(record))
        return False  # never the SDK's traceback


_installed = False
_install_lock = threading.Lock()


def install_filter() -> None:
    """Attach the filter to the SDK's stdio logger (once per process)."""
    global _installed
    with _install_lock:
        if not _installed:
            logging.getLogger(SDK_LOGGER).addFilter(_SdkParseFailure())
            _installed = True


@asynccontextmanager
async def counted_stdio(transport: Any, noise: StdoutNoise) -> AsyncIterator[Any]:
    """Enter the SDK's ``stdio_client`` transport with ``noise`` counting its stdout.

    On exit, a non-empty count is logged as one warning.
    """
    install_filter()
    token = _current.set(noise)
    try:
        async with transport as streams:
            yield streams
    finally:
        with suppress(ValueError):  # exited in another context: nothing to restore
            _current.reset(token)
        summary = noise.summary()
        if summary is not None:
            log.warning(summary)
