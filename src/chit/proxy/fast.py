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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import INTERNAL_ERROR, PROTOCOL_VERSION_META_KEY

from chit.proxy import wire as pwire
from chit.proxy.models import ForwardParams
from chit.tasks import wire

if TYPE_CHECKING:
    from chit.proxy.host import ProxyHost

log = logging.getLogger("chit.proxy")

PASSED = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete"})
Job = Callable[[], Awaitable[bytes | None]]
"""Runs one request of the fast path; its answer line (None: cancelled, no answer)."""


def enabled() -> bool:
    """False when ``CHIT_PROXY_FAST=0`` (every request takes the SDK's path)."""
    return os.environ.get("CHIT_PROXY_FAST", "1") != "0"


class FastPath:
    """Decides and runs the fast path for one proxy's host (see the module docstring)."""

    def __init__(self, host: ProxyHost) -> None:
        """Serve ``host``'s pass-through requests."""
        self.host = host
        self.inflight: dict[int | str, anyio.CancelScope] = {}

    def take(self, line: bytes) -> Job | None:
        """The job for ``line`` when it takes the fast path, else None.

        A ``notifications/cancelled`` for a request in flight here cancels it and still
        returns None (the SDK's path sees it too and finds nothing to cancel).
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
                self._cancelled(msg.get("params"))
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
            error: dict[str, Any] = {"code": INTERNAL_ERROR, "message": str(exc)[:300]}
            return _line({"jsonrpc": "2.0", "id": rid, "error": error})
        if answer.error is not None:
            body: dict[str, Any] = {
                "code": int(answer.error.get("code", INTERNAL_ERROR)),
                "message": str(answer.error.get("message", "")),
            }
            if answer.error.get("data") is not None:
                body["data"] = answer.error["data"]
            return _line({"jsonrpc": "2.0", "id": rid, "error": body})
        return _line({"jsonrpc": "2.0", "id": rid, "result": answer.result or {}})

    def _cancelled(self, params: Any) -> None:
        rid = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(rid, int | str) and not isinstance(rid, bool):
            scope = self.inflight.get(rid)
            if scope is not None:
                scope.cancel()


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


__all__ = ["PASSED", "FastPath", "Job", "enabled"]
