"""Log records that reach no handler: one ``chit: warning: …`` line each on stderr."""

from __future__ import annotations

import logging
import os
import sys

from chit.cli.terminal import one_line


class TerminalLog(logging.Handler):
    """Log records that reach no configured handler: one ``chit: warning: …`` line each.

    Installed as :data:`logging.lastResort`, which Python already uses when nothing else
    handles a record — it printed the message and a full traceback; this prints one
    escaped line (the traceback only with ``CHIT_DEBUG=1``). The stream is looked up at
    each record, so a TUI that captures ``sys.stderr`` captures these too.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"chit: {record.levelname.lower()}: {one_line(record.getMessage())}"
            if record.exc_info and os.environ.get("CHIT_DEBUG"):
                import traceback

                text += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
            sys.stderr.write(text + "\n")
        except Exception:
            self.handleError(record)


def install() -> None:
    """Make :class:`TerminalLog` the last resort of this process (idempotent)."""
    if not isinstance(logging.lastResort, TerminalLog):
        logging.lastResort = TerminalLog(logging.WARNING)
