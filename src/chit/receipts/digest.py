"""Digests and bounded summaries: what a receipt may retain instead of raw data.

A receipt keeps a digest of the arguments and of the result, never the values. A plain
SHA-256 of low-entropy arguments (``{"confirm": true}``) can be guessed, so callers that
hold a secret key (the vault's data key) should pass ``key`` to get a keyed HMAC digest.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from chit.receipts.models import SUMMARY_MAX, bound_text

__all__ = [
    "args_digest",
    "canonical_json",
    "redact",
    "result_digest",
    "structured_keys",
    "summarize_result",
]

_HEX_CHARS: Final = 32  # 128 bits: plenty to tell two calls apart

_SECRET_PATTERNS: Final = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(
        r"(?i)\b(api[_-]?key|access[_-]?token|refresh[_-]?token|token|secret|password|passwd)"
        r"(\"?\s*[:=]\s*\"?)[^\s\",;]+"
    ),
    re.compile(r"\b(sk|pk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{12,}\b"),
)


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` as canonical JSON (sorted keys, no whitespace, UTF-8).

    Raises:
        TypeError: if ``value`` holds something that is not JSON.
        ValueError: if it holds NaN or an infinity.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _digest(value: Any, key: bytes | None) -> str:
    data = canonical_json(value)
    if key is None:
        return "sha256:" + hashlib.sha256(data).hexdigest()[:_HEX_CHARS]
    return "hmac-sha256:" + hmac.new(key, data, hashlib.sha256).hexdigest()[:_HEX_CHARS]


def args_digest(arguments: Mapping[str, Any] | None, key: bytes | None = None) -> str:
    """Digest a tool call's arguments; equal arguments give equal digests.

    Args:
        arguments: the ``tools/call`` arguments (None is treated as ``{}``).
        key: optional secret; gives an ``hmac-sha256:`` digest that cannot be guessed.

    Returns:
        ``"sha256:<32 hex>"`` or ``"hmac-sha256:<32 hex>"``.
    """
    return _digest(dict(arguments or {}), key)


def result_digest(result: Any, key: bytes | None = None) -> str:
    """Digest a tool result (or error object) the same way as ``args_digest``.

    Args:
        result: the JSON form of the result, e.g. ``CallToolResult.model_dump(mode="json")``.
        key: optional secret for a keyed digest.

    Returns:
        ``"sha256:<32 hex>"`` or ``"hmac-sha256:<32 hex>"``.
    """
    return _digest(result, key)


def redact(text: str) -> str:
    """Mask things that look like credentials (bearer tokens, ``password=…``, API keys)."""
    text = _SECRET_PATTERNS[0].sub(lambda m: f"{m.group(1)} [redacted]", text)
    text = _SECRET_PATTERNS[1].sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    return _SECRET_PATTERNS[2].sub("[redacted]", text)


def _block_text(block: Any) -> str:
    if not isinstance(block, Mapping):
        return str(block)
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(str(block.get("data", ""))) * 3 // 4  # base64 → bytes, roughly
        return f"[{kind} {block.get('mimeType', '?')}, {size} bytes]"
    if kind == "resource_link":
        return f"[resource {block.get('name') or block.get('uri', '?')}]"
    if kind == "resource":
        resource = block.get("resource")
        uri = resource.get("uri", "?") if isinstance(resource, Mapping) else "?"
        return f"[embedded resource {uri}]"
    return f"[{kind or 'unknown'} content]"


def structured_keys(result: Any) -> tuple[str, ...] | None:
    """Return the sorted top-level keys of a result's ``structuredContent``, if it has one."""
    if isinstance(result, Mapping):
        structured = result.get("structuredContent")
        if isinstance(structured, Mapping):
            return tuple(sorted(str(k) for k in structured))
    return None


def summarize_result(content: Any, limit: int = SUMMARY_MAX) -> str:
    """Make a short, redacted, single-line summary of a tool result.

    Accepts a ``CallToolResult``-shaped mapping (``content`` blocks, ``structuredContent``),
    a list of content blocks, or a plain string. Binary content is described, not copied.

    Args:
        content: the result in its JSON form.
        limit: the maximum length of the summary.

    Returns:
        A string of at most ``limit`` characters.
    """
    if isinstance(content, str):
        text = content
    elif isinstance(content, Mapping):
        blocks = content.get("content")
        if isinstance(blocks, Sequence) and not isinstance(blocks, str) and blocks:
            text = " ".join(_block_text(b) for b in blocks)
        elif isinstance(content.get("structuredContent"), Mapping):
            keys = structured_keys(content) or ()
            text = "structured result with " + ", ".join(keys)
        else:
            text = "[empty result]"
    elif isinstance(content, Sequence):
        text = " ".join(_block_text(b) for b in content) if content else "[empty result]"
    else:
        text = str(content)
    # Redact before cutting, so a cut can't leave half a secret unredacted.
    single_line = " ".join(redact(text).split())
    return bound_text(single_line, limit) or ""
