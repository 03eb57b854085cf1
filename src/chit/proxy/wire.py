"""Small rewrites of MCP messages between a host's protocol version and the server's.

The host and the engine's session to the server may have negotiated different versions
(a 2025-11-25 host in front of a 2026-07-28 server, or the reverse). Requests lose the
host's own per-request envelope before the engine stamps its own; results are shaped
for the host's version when the two differ.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as mcp_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from chit.tasks import wire

__all__ = [
    "CLIENT_INFO_META_KEY",
    "annotate_tools",
    "declared_extension",
    "for_host",
    "host_params",
    "is_modern",
    "task_support_of",
    "tool_names",
    "undeclare_extension",
]

_HOST_ENVELOPE = (
    PROTOCOL_VERSION_META_KEY,
    CLIENT_INFO_META_KEY,
    CLIENT_CAPABILITIES_META_KEY,
    "progressToken",  # the engine sends its own token and relays progress back
)
_MODERN_ONLY_RESULT_KEYS = ("resultType", "ttlMs", "cacheScope")


DEFAULT_HEARTBEAT_S = 5.0


def heartbeat_s() -> float:
    """Seconds between progress notifications while nothing changes.

    ``CHIT_PROXY_HEARTBEAT_S`` overrides the default (5 s) for hosts with very short
    request timeouts; an unusable value keeps the default.
    """
    try:
        value = float(os.environ.get("CHIT_PROXY_HEARTBEAT_S", "") or DEFAULT_HEARTBEAT_S)
    except ValueError:
        return DEFAULT_HEARTBEAT_S
    return value if 0.1 <= value <= 3600 else DEFAULT_HEARTBEAT_S


def is_modern(version: str | None) -> bool:
    """True for the 2026-07-28 era (per-request envelopes, no handshake)."""
    return version in MODERN_PROTOCOL_VERSIONS


def host_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of the host's params without its per-request envelope and progress token."""
    out = dict(params or {})
    meta = out.get("_meta")
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if k not in _HOST_ENVELOPE}
        if kept:
            out["_meta"] = kept
        else:
            out.pop("_meta")
    return out


def undeclare_extension(params: dict[str, Any]) -> None:
    """Drop the tasks extension from a stamped 2026 request (the host did not declare it).

    The stamp's capability dict is shared by every request of the session: replaced
    here, never changed in place.
    """
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return
    caps = meta.get(CLIENT_CAPABILITIES_META_KEY)
    if not isinstance(caps, dict) or wire.EXTENSION_ID not in (caps.get("extensions") or {}):
        return
    # A new dict at each level that changes (a deep copy per call was measurable).
    caps = dict(caps)
    extensions = {k: v for k, v in caps["extensions"].items() if k != wire.EXTENSION_ID}
    if extensions:
        caps["extensions"] = extensions
    else:
        caps.pop("extensions")
    meta[CLIENT_CAPABILITIES_META_KEY] = caps


def declared_extension(params: dict[str, Any] | None) -> bool:
    """True when a 2026 request's envelope declares the tasks extension."""
    meta = (params or {}).get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and wire.EXTENSION_ID in extensions


def for_host(method: str, result: dict[str, Any], host: str, upstream: str) -> dict[str, Any]:
    """Shape a server's result for the host's protocol version.

    Same version: unchanged (transparent, the server's own fields included). Different:
    the result is passed through the SDK's per-version surface of ``method`` where it
    has one (fields the host's version lacks are dropped); a modern host always gets a
    ``resultType``, a legacy one never does.
    """
    if host == upstream:
        return result
    out = dict(result)
    if not is_modern(host):
        for key in _MODERN_ONLY_RESULT_KEYS:
            out.pop(key, None)
        meta = out.get("_meta")
        if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
            meta = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}
            if meta:
                out["_meta"] = meta
            else:
                out.pop("_meta")
    if is_modern(host) and method in mcp_methods.CACHEABLE_METHODS:
        # Required at 2026 (SEP-2549); the SDK's own default hint: immediately stale, private.
        out.setdefault("ttlMs", 0)
        out.setdefault("cacheScope", "private")
    if method in mcp_methods.SPEC_CLIENT_METHODS:
        # No surface for it at the host's version: the server's shape, as sent.
        with contextlib.suppress(KeyError, ValueError, ValidationError):
            out = mcp_methods.serialize_server_result(method, host, out)
    if is_modern(host):
        out.setdefault("resultType", "complete")
    return out


def annotate_tools(result: dict[str, Any], support: dict[str, str]) -> dict[str, Any]:
    """Give a 2025 host each tool's ``execution.taskSupport`` as chit will honour it.

    For a 2025 server that is the server's own; for a 2026 server every tool may become
    a task (``optional``). A ``required`` tool stays ``required``, as the host would see
    it directly (a host that refuses to call it plainly would refuse directly too).
    """
    tools = result.get("tools")
    if not isinstance(tools, list):
        return result
    out = dict(result)
    annotated = []
    for tool in tools:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            level = support.get(tool["name"])
            tool = dict(tool)
            if level is not None:
                tool["execution"] = {**(tool.get("execution") or {}), "taskSupport": level}
            elif "execution" in tool:
                tool["execution"] = {**tool["execution"], "taskSupport": "forbidden"}
        annotated.append(tool)
    out["tools"] = annotated
    return out


def tool_names(result: dict[str, Any]) -> set[str]:
    """The tool names of a ``tools/list`` result (malformed entries skipped)."""
    return {
        tool["name"]
        for tool in result.get("tools") or []
        if isinstance(tool, dict) and isinstance(tool.get("name"), str)
    }


def task_support_of(result: dict[str, Any], generation: str | None) -> dict[str, str]:
    """Tool name → ``required``/``optional`` from a ``tools/list`` result of the server.

    2025 servers say it per tool (``execution.taskSupport``); a 2026 server with the
    extension decides per call, so every tool may become a task (``optional``).
    """
    out: dict[str, str] = {}
    for tool in result.get("tools") or []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        if generation == wire.PROTOCOL_2026:
            out[tool["name"]] = "optional"
        elif generation == wire.PROTOCOL_2025:
            level = (tool.get("execution") or {}).get("taskSupport")
            if level in ("required", "optional"):
                out[tool["name"]] = level
    return out
