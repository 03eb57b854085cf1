"""Background work with an owner: never a dead app, never a callback on a gone screen.

Every blocking call (store, engine, server probe) runs in a thread worker started by
:meth:`WorkOwner.submit` on the screen that needs the result. Textual cancels a node's
workers when the node is removed, and a removed screen processes no more messages, so a
result that arrives after ``Esc`` is dropped instead of touching widgets that are gone
(the ``NoMatches: No nodes match '#tool'`` crash). A worker that fails, or a ``done``
callback that raises, becomes one readable toast and one log line; the app lives on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from textual.dom import DOMNode
from textual.worker import Worker, WorkerState

from chit.errors import ChitError

log = logging.getLogger("chit.tui")


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def readable(error: BaseException) -> str:
    """One line a person can act on; never a bare exception class name."""
    error = _leaf(error)
    if isinstance(error, ChitError):
        return error.message
    if isinstance(error, TimeoutError):
        return "no answer in time"
    if isinstance(error, ConnectionError | OSError) and getattr(error, "strerror", None):
        return f"{error.strerror}"
    text = " ".join(str(error).split())
    return f"unexpected problem: {text}" if text else "unexpected problem (details in the log)"


def report(node: DOMNode, what: str, error: BaseException) -> None:
    """Tell the person (a toast) and the log (with the traceback) that ``what`` failed."""
    expected = isinstance(_leaf(error), ChitError)
    log.log(
        logging.WARNING if expected else logging.ERROR,
        "%s failed: %r",
        what,
        error,
        exc_info=None if expected else error,
    )
    node.app.notify(readable(error), title=f"{what} failed", severity="error")


class WorkOwner:
    """Mixin for a screen (or the app): thread workers whose results come back here.

    ``done(result)`` runs on the UI thread, and only while the owner is still there.
    """

    _pending: dict[Worker[Any], Callable[[Any], None]]

    def submit(
        self,
        fn: Callable[..., Any],
        *args: Any,
        description: str,
        done: Callable[[Any], None] | None = None,
        group: str = "default",
        exclusive: bool = False,
    ) -> Worker[Any]:
        """Run ``fn(*args)`` in a thread worker owned by this node."""
        node: Any = self
        worker: Worker[Any] = node.run_worker(
            partial(fn, *args),
            thread=True,
            exit_on_error=False,
            group=group,
            exclusive=exclusive,
            description=description,
        )
        if done is not None:
            if not hasattr(self, "_pending"):
                self._pending = {}
            self._pending[worker] = done
        return worker

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Deliver a result, report an error, forget a cancelled worker."""
        pending = getattr(self, "_pending", {})
        worker, node = event.worker, self
        assert isinstance(node, DOMNode)
        if event.state is WorkerState.SUCCESS:
            callback = pending.pop(worker, None)
            if callback is None or not node.is_attached:
                return
            try:
                callback(worker.result)
            except Exception as exc:  # a bug in a callback: report it, keep the app alive
                report(node, worker.description or "update", exc)
        elif event.state is WorkerState.ERROR:
            pending.pop(worker, None)
            report(node, worker.description or "work", worker.error or RuntimeError())
        elif event.state is WorkerState.CANCELLED:
            pending.pop(worker, None)
