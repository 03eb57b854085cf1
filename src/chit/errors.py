"""chit's user-facing error type and the stable exit codes (documented in docs/cli.md).

Every layer may raise a ``ChitError`` subclass; the CLI turns it into one readable line
on stderr and its exit code. Nothing here imports the rest of chit but the bottom module
``chit.redaction``: a message is redacted when the error is made, so a task handle or a
sealed secret quoted by a server never reaches a terminal, a toast or a log.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Stable process exit codes. Never renumber: scripts depend on them."""

    OK = 0
    INTERNAL = 1  # a bug: unexpected exception (details with CHIT_DEBUG=1)
    USAGE = 2  # bad command line or bad input value (click uses 2 as well)
    NOT_FOUND = 3  # no such receipt, server, tool or work record
    KEY_STORE = 4  # key store unavailable, data key missing, handle cannot be opened
    STORE = 5  # the SQLite store is locked, corrupt, or from a newer chit
    UNREACHABLE = 6  # the MCP server could not be reached or the connection dropped
    PROTOCOL = 7  # the server answered with an error, or an incompatible/invalid reply
    CONFLICT = 8  # the action does not apply in the receipt's state (e.g. answer a done task)
    # Outcomes of ``chit call --wait`` (and ``chit show --wait``):
    COMPLETED_WITH_ERROR = 10  # lifecycle completed but the result has isError (unresolved)
    FAILED = 11  # the task failed
    CANCELLED = 12  # the task was cancelled
    INPUT_REQUIRED = 13  # the task needs an answer and there is no terminal to ask on
    EXPIRED_OR_LOST = 14  # the task expired or vanished from the server
    REJECTED = 15  # completed, but the acceptance check rejected the result
    DETACHED = 130  # Ctrl-C: this command stopped (while following: the task goes on)


class ChitError(Exception):
    """An error meant for the user: one clear line, a stable exit code.

    ``details`` are further lines when one error has several parts (each argument that
    does not fit a tool's schema): the CLI prints one line per detail under the message.
    """

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        exit_code: ExitCode | None = None,
        details: tuple[str, ...] | list[str] = (),
    ) -> None:
        # Imported when an error is made, not with this module: every command imports
        # chit.errors, and most runs never raise.
        from chit.redaction import redact

        super().__init__(redact(message) if isinstance(message, str) else message)
        if exit_code is not None:
            self.exit_code = exit_code
        self.details = tuple(redact(d) for d in details)

    @property
    def message(self) -> str:
        """The one-line message shown to the user."""
        return str(self.args[0]) if self.args else type(self).__name__


class UsageError(ChitError):
    """Bad input from the user."""

    exit_code = ExitCode.USAGE


class NotFound(ChitError):
    """The named object does not exist (or is not visible to the caller)."""

    exit_code = ExitCode.NOT_FOUND


class Conflict(ChitError):
    """The action does not apply to the object's current state."""

    exit_code = ExitCode.CONFLICT
