"""Requests the proxy passes on unread: from the host's pipe to the engine and back as JSON.

Most of what a host sends through ``chit proxy`` is passed on as it is, and for those
the SDK's server path — the message parsed into models, a request context, the
middleware chain, an OpenTelemetry span, for a 2026 host a connection per request, the
answer serialised again — was about half of the proxy's CPU per call
(``benchmarks/proxy.py``). A request takes this fast path only when the full path
would do nothing but pass it on and hand the answer back unchanged:

* a request (it has an id) of a method in :data:`PASSED`, whose params are an object
  without a ``progressToken`` (progress is relayed per request by the full path);
* the host's protocol version (a 2026 request's envelope, else the handshake's) is the
  server session's, so the answer needs no reshaping;
* the host introduced itself already and declared none of elicitation, sampling and
  roots (the server's questions are asked on a request of the full path);
* for ``tools/call``: the tool is known from the server's listing and the call would be
  passed on — no task asked for (``params.task``, a declared 2026 extension), and for a
  2025 host a tool that cannot be a task (the others are held: :mod:`chit.proxy.held`).

Anything else — and anything this module cannot read — takes the full path, unchanged.
A host's ``notifications/cancelled`` for a request on the fast path cancels it (and
it upstream), as the full path does. ``CHIT_PROXY_FAST=0`` turns the fast path off.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import INTERNAL_ERROR, PROTOCOL_VERSION_META_KEY
from pydantic import ValidationError

from chit.engine import rpc
from chit.errors import ChitError
from chit.proxy import wire as pwire
from chit.proxy.models import Answer, ForwardParams
from chit.proxy.stdio import Inline, Job, Write
from chit.tasks import wire

if TYPE_CHECKING:
    from chit.proxy.host import ProxyHost

log = logging.getLogger("chit.proxy")

PASSED = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete"})


def enabled() -> bool:
    """False when ``CHIT_PROXY_FAST=0`` (every request takes the SDK's path)."""
    return os.environ.get("CHIT_PROXY_FAST", "1") != "0"


@dataclass(eq=False)
class _Sent:
    """A request sent to the daemon whose answer comes by callback."""

    route: str
    request_id: int = 0


class FastPath:
    """Decides and runs the fast path for one proxy's host (see the module docstring)."""

    def __init__(self, host: ProxyHost) -> None:
        """Serve ``host``'s pass-through requests."""
        self.host = host
        self.inflight: dict[int | str, anyio.CancelScope | _Sent] = {}

    def take(self, line: bytes, write: Write) -> Job | Inline | None:
        """The job for ``line`` when it takes the fast path, else None.

        Through the daemon the request is sent by the reader itself and the answer
        written by the connection's reader (:meth:`RemoteBackend.request_soon`): no task
        per request. A ``notifications/cancelled`` for a request in flight here cancels
        it; the SDK's path sees it too and finds nothing to cancel.
        """
        if b'"method"' not in line:
            return None
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return None
        method = msg.get("method")
        if "id" not in msg:
            if method == "notifications/cancelled" and self.inflight:
                return self._cancelled(msg.get("params"))
            return None
        rid = msg["id"]
        params = msg.get("params")
        if (
            method not in PASSED
            or isinstance(rid, bool)
            or not isinstance(rid, int | str)
            or rid in self.inflight
            or not isinstance(params, dict)
        ):
            return None
        declare = self._passable(method, params)
        if declare is None:
            return None
        if hasattr(self.host.backend, "request_soon"):
            return Inline(partial(self._send, rid, method, params, declare, write))
        scope = anyio.CancelScope()
        self.inflight[rid] = scope

        async def job() -> bytes | None:
            try:
                with scope:
                    return await self._forward(rid, method, params, declare)
                return None  # cancelled by the host: no answer is due
            finally:
                self.inflight.pop(rid, None)

        return job

    async def _send(
        self,
        rid: int | str,
        method: str,
        params: dict[str, Any],
        declare: bool,
        write: Write,
    ) -> None:
        """Send the request to the daemon; its answer is written by :meth:`_answered`."""
        host = self.host
        sent = _Sent(host.fast_route())
        body: dict[str, Any] = {
            "server": host.server,
            "method": method,
            "params": params,
            "route": sent.route,
        }
        if declare:
            body["declare_extension"] = True  # as ForwardParams dumps it (defaults left out)
        self.inflight[rid] = sent
        try:
            sent.request_id = await host.backend.request_soon(  # type: ignore[attr-defined]
                "proxy.request", body, partial(self._answered, rid, sent, write)
            )
        except Exception as exc:  # the daemon went away: its own handling follows
            self.inflight.pop(rid, None)
            log.info("a request was not passed on: %s", type(exc).__name__)
            write(_error_line(rid, INTERNAL_ERROR, str(exc)[:300]))

    def _answered(self, rid: int | str, sent: _Sent, write: Write, frame: Any) -> None:
        """The daemon's reply to :meth:`_send` (None: the connection ended first)."""
        if self.inflight.get(rid) is not sent:
            return  # the host cancelled it: no answer is due
        del self.inflight[rid]
        if frame is None:
            message = "chit's daemon went away while the request was in flight"
            write(_error_line(rid, INTERNAL_ERROR, message))
            return
        if frame.error is not None:
            try:
                rpc.raise_error(frame.error)
            except ChitError as exc:
                write(_error_line(rid, INTERNAL_ERROR, str(exc)[:300]))
            return
        body = frame.result
        if not (
            isinstance(body, dict)
            and body.keys() <= {"result", "error"}
            and isinstance(body.get("result"), dict | None)
            and isinstance(body.get("error"), dict | None)
        ):
            try:
                answer = Answer.model_validate(body)
            except ValidationError:
                message = "chit's daemon sent an unreadable 'proxy.request' reply"
                write(_error_line(rid, INTERNAL_ERROR, message))
                return
            body = {"result": answer.result, "error": answer.error}
        write(_answer_line(rid, body.get("result"), body.get("error")))

    def _passable(self, method: str, params: dict[str, Any]) -> bool | None:
        """None when the full path is needed; else whether the 2026 extension is declared."""
        host = self.host
        if not host.introduced or host.can_elicit or host.can_sample or host.can_list_roots:
            return None
        meta = params.get("_meta")
        if meta is not None and not isinstance(meta, dict):
            return None
        meta = meta or {}
        if "progressToken" in meta:
            return None
        version = meta.get(PROTOCOL_VERSION_META_KEY) or host.session_version
        if version is None or version != host.info.protocol_version:
            return None
        modern = pwire.is_modern(version)
        declared = modern and pwire.declared_extension(params)
        if method != "tools/call":
            return declared
        name = params.get("name")
        if not isinstance(name, str) or declared or "task" in params:
            return None
        if host.support_stale or (name not in host.support and name not in host.listed):
            return None  # the full path lists the tools first
        support = host.support.get(name, "forbidden") if host.has_tasks else "forbidden"
        if modern:
            if support == "required" and host.info.generation == wire.PROTOCOL_2025:
                return None  # the full path answers -32021
            return False
        return False if support == "forbidden" else None

    async def _forward(
        self, rid: int | str, method: str, params: dict[str, Any], declare: bool
    ) -> bytes:
        host = self.host
        try:
            answer = await host.backend.request(
                ForwardParams(
                    server=host.server,
                    method=method,
                    params=params,
                    route=host.fast_route(),
                    progress=False,
                    declare_extension=declare,
                )
            )
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # the daemon went away: its own handling follows
            log.info("a request was not passed on: %s", type(exc).__name__)
            return _error_line(rid, INTERNAL_ERROR, str(exc)[:300])
        return _answer_line(rid, answer.result, answer.error)

    def _cancelled(self, params: Any) -> Inline | None:
        rid = params.get("requestId") if isinstance(params, dict) else None
        if not isinstance(rid, int | str) or isinstance(rid, bool):
            return None
        entry = self.inflight.get(rid)
        if isinstance(entry, anyio.CancelScope):
            entry.cancel()
        elif entry is not None:
            del self.inflight[rid]
            backend: Any = self.host.backend
            if backend.forget(entry.request_id):  # no answer is due any more
                return Inline(partial(self._cancel_upstream, entry.route), pass_on=True)
        return None

    async def _cancel_upstream(self, route: str) -> None:
        backend: Any = self.host.backend
        try:
            await backend.request_soon("proxy.cancel", {"route": route})
        except Exception as exc:  # the daemon went away: it cancelled the route itself
            log.info("a cancel was not passed on: %s", type(exc).__name__)


def _error_line(rid: int | str, code: int, message: str) -> bytes:
    return _line({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


def _answer_line(
    rid: int | str, result: dict[str, Any] | None, error: dict[str, Any] | None
) -> bytes:
    """The host's answer line for the server's result or error."""
    if error is not None:
        body: dict[str, Any] = {
            "code": int(error.get("code", INTERNAL_ERROR)),
            "message": str(error.get("message", "")),
        }
        if error.get("data") is not None:
            body["data"] = error["data"]
        return _line({"jsonrpc": "2.0", "id": rid, "error": body})
    return _line({"jsonrpc": "2.0", "id": rid, "result": result or {}})


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


__all__ = ["PASSED", "FastPath", "Job", "enabled"]
