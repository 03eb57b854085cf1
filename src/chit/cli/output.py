"""Rendering receipts for the terminal and for machines (JSON / JSON Lines).

What leaves chit here is within the data boundary: receipts carry digests, bounded
summaries and handle *fingerprints*; sealed handles never reach these functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chit import clock
from chit.cli.terminal import echo

if TYPE_CHECKING:
    from chit.receipts import Observation, Receipt

# The receipt domain (pydantic models, decisions) is imported inside the functions that
# format a receipt: a command with nothing to format never loads it.

# Bidirectional overrides and isolates reorder what follows them on screen ("Trojan
# source"); they have no business in a receipt's one-line fields.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal as one line of a table or listing.

    Control characters (terminal escapes, newlines, tabs, DEL, C1), bidi overrides and
    lone surrogates are shown as ``\\xNN``/``\\uNNNN`` escapes: a server or agent chose
    these strings, and an escape sequence must not move the cursor, retitle the window
    or reorder the line for whoever reads them. JSON output needs none of this
    (``json.dumps`` escapes control characters itself).
    """
    if text.isprintable() and not _BIDI.intersection(text):
        return text
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if ch in _BIDI or 0xD800 <= code < 0xE000 or (not ch.isprintable() and code < 0xA0):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def receipt_json(receipt: Receipt, now: datetime | None = None) -> dict[str, Any]:
    """The receipt as a JSON object, plus its freshness and next safe decision."""
    from chit.receipts.decisions import next_safe_decision
    from chit.receipts.queries import freshness

    at = now or clock.now()
    doc: dict[str, Any] = receipt.model_dump(mode="json")
    doc["freshness"] = freshness(receipt, at).value
    decision = next_safe_decision(receipt, at)
    doc["next"] = {
        "action": str(decision.action),
        "actor": str(decision.actor),
        "reason": decision.reason,
        "check_at": clock.iso(decision.check_at) if decision.check_at else None,
    }
    return doc


def observation_json(observation: Observation) -> dict[str, Any]:
    """One timeline row as a JSON object."""
    return observation.model_dump(mode="json")


def emit_json(value: Any) -> None:
    """Write ``value`` as indented JSON on stdout."""
    echo(json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False))


def emit_jsonl(values: Iterable[Mapping[str, Any]]) -> None:
    """Write one compact JSON object per line on stdout."""
    for value in values:
        echo(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def ago(then: datetime | None, now: datetime) -> str:
    """Human "12 s ago" / "3 min ago" / "2 h ago" / "4 d ago" (or "—")."""
    if then is None:
        return "—"
    seconds = int((now - then).total_seconds())
    if seconds < 0:
        return f"in {_span(-seconds)}"
    return f"{_span(seconds)} ago"


def _span(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def short_id(receipt_id: str) -> str:
    """The short form users type (a unique prefix is accepted everywhere)."""
    return receipt_id[-10:] if len(receipt_id) > 10 else receipt_id


def receipt_table(receipts: list[Receipt], now: datetime) -> list[str]:
    """Plain-text table lines for ``chit receipts``."""
    from chit.receipts.queries import freshness

    header = (
        f"{'RECEIPT':<26}  {'STATE':<14}  {'FRESH':<12}  {'SERVER':<14}  {'TOOL':<18}  OBSERVED"
    )
    lines = [header]
    for r in receipts:
        lines.append(
            f"{r.receipt_id:<26}  {r.state.value:<14}  {freshness(r, now).value:<12}  "
            f"{printable(r.server)[:14]:<14}  {printable(r.tool)[:18]:<18}  "
            f"{ago(r.status_at, now)}"
        )
    return lines


def repeated(obs: Observation) -> str:
    """``  ×240 (last 2026-01-01T12:04:00Z)`` for a row seen 240 times, else nothing."""
    if obs.repeats <= 1:
        return ""
    last = f" (last {clock.iso(obs.last_at)})" if obs.last_at is not None else ""
    return f"  ×{obs.repeats}{last}"


def receipt_detail(receipt: Receipt, timeline: list[Observation], now: datetime) -> list[str]:
    """Human-readable lines for ``chit show``: the nine elements and the timeline."""
    from chit.cli.forms import request_lines
    from chit.receipts.decisions import next_safe_decision
    from chit.receipts.queries import freshness

    r = receipt
    d = next_safe_decision(r, now)
    p = printable  # every free-text field below came from a server, an agent or a person
    lines = [
        f"receipt      {r.receipt_id}",
        f"work         {p(r.work_ref or '—')}",
        f"server       {p(r.server)}  ({r.protocol.value})",
        f"tool         {p(r.tool)}   args {r.args_digest}",
        f"purpose      {p(r.purpose or '—')}",
        f"accepted     {clock.iso(r.accepted_at)}",
        f"state        {r.state.value}" + (f" — {p(r.status_message)}" if r.status_message else ""),
        f"observed     {ago(r.status_at, now)} ({freshness(r, now).value})",
    ]
    if r.synchronous:
        lines.append(
            f"synchronous  completed synchronously: {p(r.not_task_reason or 'no reason given')}"
        )
    if r.expires_at:
        lines.append(f"expires      {clock.iso(r.expires_at)} ({ago(r.expires_at, now)})")
    if r.retrieval_error:
        lines.append(f"retrieval    {r.retrieval.value}: {p(r.retrieval_error)}")
    for req in r.input_requests:
        lines.append(
            f"input        [{req.answer_status.value}] {p(req.key)}: {p(req.message or '')}"
        )
        if req.is_pending and not r.is_terminal:
            # What answering takes: each field's type, options with their titles, defaults.
            lines += request_lines(req, indent=" " * 13)[1:]
    c = r.cancel
    cancel = c.posture.value
    if c.requested_at:
        cancel += f", requested {clock.iso(c.requested_at)}"
    if c.acknowledged_at:
        cancel += f", acknowledged {clock.iso(c.acknowledged_at)}"
    if c.observed_at:
        cancel += f", observed {c.observed_state.value if c.observed_state else '?'}"
        cancel += f" at {clock.iso(c.observed_at)}"
    if c.completed_despite_cancel:
        cancel += " (completed despite cancel)"
    lines.append(f"cancel       {cancel}")
    if r.outcome:
        o = r.outcome
        if o.is_rpc_error:
            lines.append(f"outcome      error {o.error_code}: {p(o.error_message or '')}")
        else:
            flag = "isError — unresolved" if o.is_error else "ok"
            lines.append(f"outcome      {flag}: {p(o.summary or '')}")
    a = r.acceptance
    lines.append(
        f"acceptance   {a.state.value}"
        + (f" ({p(a.check)})" if a.check else "")
        + (f": {p(a.why)}" if a.why else "")
    )
    if r.handle:
        lines.append(f"handle       sealed, fingerprint {r.handle.fingerprint}")
    lines.append(f"next         {d.actor}: {p(d.reason)}")
    lines.append("timeline")
    for obs in timeline:
        mark = "" if obs.applied else "  (not applied)"
        status = f" {obs.status.value}" if obs.status else ""
        message = f" — {p(obs.message)}" if obs.message else ""
        lines.append(
            f"  {clock.iso(obs.at)}  {obs.source.value:<12} {obs.kind.value}{status}{message}{mark}"
            + repeated(obs)
        )
    return lines
