"""The detail pane: one receipt's nine elements and its timeline, or one work record."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from chit.receipts import CancelPosture, Observation, Receipt
from chit.tui.safe import one_line, plain
from chit.tui.view import Detail, RecordDetail, Row, ago, countdown, observed
from chit.tui.widgets.badges import CONDITION_STYLE, palette, state_badge, styled


def stamp(at: datetime | None, now: datetime) -> str:
    """``2026-01-01 12:00:03Z (12 s ago)``, or ``—``."""
    if at is None:
        return "—"
    when = ago(now, at) if at <= now else f"in {ago(at, now).removesuffix(' ago')}"
    return f"{at:%Y-%m-%d %H:%M:%S}Z ({when})"


def _section(title: str) -> Text:
    return Text(f"\n{title}", style="bold underline")


def _kv(rows: list[tuple[str, RenderableType]]) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="italic", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, value)
    return table


def _cancel(r: Receipt, now: datetime) -> Table:
    c = r.cancel
    rows: list[tuple[str, RenderableType]] = [("posture", c.posture.value)]
    if c.posture is not CancelPosture.NOT_REQUESTED:
        rows += [
            ("requested", stamp(c.requested_at, now)),
            ("acknowledged", stamp(c.acknowledged_at, now)),
        ]
    if c.observed_at is not None:
        seen = c.observed_state.value if c.observed_state else "?"
        rows.append(("observed", f"{stamp(c.observed_at, now)} → {seen}"))
    if c.completed_despite_cancel:
        rows.append(("", Text("completed despite the cancel: the effect happened", style="bold")))
    if c.reason:
        rows.append(("why", plain(c.reason)))
    return _kv(rows)


def _outcome(r: Receipt) -> RenderableType:
    o = r.outcome
    if o is None:
        return Text("not retrieved yet" if r.is_terminal else "task still running", style="italic")
    rows: list[tuple[str, RenderableType]] = []
    if o.is_rpc_error:
        rows.append(("error", plain(f"{o.error_code}: {o.error_message or ''}")))
        if o.failure_class:
            rows.append(("class", o.failure_class.value))
    else:
        rows.append(("result", Text("tool error (isError)", style="bold") if o.is_error else "ok"))
        rows.append(("summary", plain(o.summary or "—")))
        if o.structured_keys is not None:
            keys = ", ".join(one_line(k) for k in o.structured_keys) or "(empty)"
            rows.append(("structured", plain(keys)))
    if o.result_digest:
        rows.append(("digest", o.result_digest[:23]))
    return _kv(rows)


def _when(obs: Observation) -> str:
    """The time cell: ``12:00:03``, or ``12:00:03–12:04:00`` for a row seen again since."""
    when = f"{obs.at:%H:%M:%S}"
    if obs.repeats > 1 and obs.last_at is not None:
        return f"{when}–{obs.last_at:%H:%M:%S}"
    return when


def _said(obs: Observation) -> Text:
    """The message cell: ``×240 step 1 of 100`` for a row the server said 240 times."""
    text = Text()
    if obs.repeats > 1:
        text.append(f"×{obs.repeats} ", style="bold")
    if not obs.applied:
        text.append("(not applied) ")
    text.append_text(plain(obs.message or ""))
    return text


def _timeline(d: Detail) -> Table:
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="italic")
    for name in ("time", "source", "kind", "status", "message"):
        table.add_column(name, no_wrap=name != "message", overflow="fold")
    for obs in d.timeline:
        table.add_row(
            _when(obs),
            obs.source.value,
            obs.kind.value,
            obs.status.value if obs.status else "",
            _said(obs),
            style="" if obs.applied else "italic",
        )
    return table


def _host(r: Receipt, now: datetime) -> list[tuple[str, RenderableType]]:
    """The agent host that started the task through ``chit proxy`` (none otherwise)."""
    if r.host is None:
        return []
    line = plain(f"{r.host.label} via chit proxy")
    if r.host.left_at is not None:
        line.append(f"; stopped waiting {stamp(r.host.left_at, now)}", style="italic")
    return [("host", line)]


def render_receipt(d: Detail, variables: dict[str, str]) -> RenderableType:
    """Every element of a receipt, for the detail pane and screen."""
    r, now = d.receipt, d.now
    row = Row.of(r)
    head = Text.assemble(state_badge(row, variables), " ", (r.receipt_id, "bold"))
    head.append("  " + one_line(f"{r.server}/{r.tool}"))
    fresh, condition = observed(row, now)
    parts: list[RenderableType] = [
        head,
        _kv(
            [
                ("call", plain(f"{r.server} / {r.tool}")),
                ("purpose", plain(r.purpose or "—")),
                (
                    "work",
                    plain(f"{d.record.title} ({d.record.id})" if d.record else (r.work_ref or "—")),
                ),
                ("status", plain(r.status_message or r.state.value)),
                *_host(r, now),
            ]
        ),
        _section("Next safe decision"),
        _kv([(d.decision.actor.value, plain(f"{d.decision.action.value}: {d.decision.reason}"))]),
        _section("Freshness"),
        _kv(
            [
                ("condition", styled(fresh, CONDITION_STYLE[condition], variables)),
                ("accepted", stamp(r.accepted_at, now)),
                ("next check", stamp(r.next_check_at, now) if not r.is_terminal else "—"),
                ("expires", f"{countdown(now, r.expires_at)}  {stamp(r.expires_at, now)}"),
            ]
        ),
    ]
    pending = r.pending_inputs
    if pending:
        parts.append(_section(f"Waiting for you ({len(pending)})"))
        for req in pending:
            line = plain(f"• {req.message or req.key}", "bold")
            if req.url:
                line.append("\n  open: ")
                line.append(one_line(req.url), style="underline")
            parts.append(line)
    parts += [_section("Cancellation"), _cancel(r, now), _section("Outcome"), _outcome(r)]
    a = r.acceptance
    acceptance: list[tuple[str, RenderableType]] = [
        ("state", a.state.value),
        ("check", plain(a.check or "—")),
    ]
    if a.why:
        acceptance.append(("why", plain(a.why)))
    if a.decided_at:
        decided = f"{stamp(a.decided_at, now)} by {a.decided_by or '?'}"
        acceptance.append(("decided", plain(decided)))
    parts += [_section("Acceptance"), _kv(list(acceptance))]
    if r.synchronous and r.not_task_reason:
        parts += [_section("Not a task"), plain(r.not_task_reason)]
    handle = r.handle.fingerprint if r.handle else "—"
    parts += [
        _section(f"Timeline ({len(d.timeline)})"),
        _timeline(d),
        _section("Data boundary"),
        _kv([("handle", f"sealed, fingerprint {handle}"), ("retained", r.retained)]),
    ]
    return RichGroup(*parts)


def render_record(d: RecordDetail, now: datetime) -> RenderableType:
    """A work record with its notes."""
    rec = d.record
    rows: list[tuple[str, RenderableType]] = [
        ("status", plain(rec.status)),
        ("purpose", plain(rec.purpose or "—")),
        ("receipts", str(d.receipts)),
        ("updated", stamp(rec.updated_at, now)),
    ]
    if rec.completed_at:
        done = f"{stamp(rec.completed_at, now)} {rec.completion_summary or ''}"
        rows.append(("completed", plain(done)))
    notes = Table(box=None, padding=(0, 1), show_header=False)
    notes.add_column(style="italic", no_wrap=True)
    notes.add_column(overflow="fold")
    for note in d.notes:
        notes.add_row(f"{note.at:%H:%M:%S}", plain(note.text))
    return RichGroup(
        Text.assemble(
            ("work record ", "italic"), plain(one_line(rec.title), "bold"), f"  {rec.id}"
        ),
        _kv(rows),
        _section(f"Notes ({len(d.notes)})"),
        notes if d.notes else Text("no notes yet", style="italic"),
    )


class DetailView(VerticalScroll):
    """A scrollable pane that shows a receipt or a work record."""

    DEFAULT_CSS = """
    DetailView { padding: 0 1; }
    DetailView > Static { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        hint = Text("Select a receipt to see its timeline.", style="italic")
        yield Static(hint, id="detail-body")

    def show(self, detail: Detail | RecordDetail | None, now: datetime) -> None:
        """Render ``detail`` (None: the row is gone)."""
        body = self.query_one("#detail-body", Static)
        # A receipt's detail is rendered as read (its times are the read's); a record's
        # moves with the minute. Re-rendering the same lays the screen out for nothing.
        key = (detail, self.app.theme, None if isinstance(detail, Detail) else now.minute)
        shown = getattr(self, "_shown", None)
        if shown is not None and shown[0] is detail and shown[1:] == key[1:]:
            return
        self._shown = key
        if detail is None:
            body.update(Text("This row no longer exists.", style="italic"))
        elif isinstance(detail, Detail):
            body.update(render_receipt(detail, palette(self.app.theme_variables)))
        else:
            body.update(render_record(detail, now))
