"""The receipts table: one page of receipts grouped under their work records.

Rows are rebuilt from a ``view.Snapshot`` only when the set of row keys changed; a
tick that only moves "observed 12 s ago" rewrites cells in place, so the cursor and
scroll position never jump.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable

from chit.receipts import Receipt
from chit.tui.view import NO_WORK, Group, Snapshot, ago, countdown, near_expiry, observed
from chit.tui.widgets.badges import CONDITION_STYLE, state_badge, styled

FIXED = {"state": 9, "id": 6, "tool": 16, "observed": 16, "expires": 8}
"""Widths of every column but the purpose, which takes what is left."""

Cells = tuple[Text | str, ...]


def receipt_key(receipt_id: str) -> str:
    """Row key of a receipt row."""
    return f"r:{receipt_id}"


def group_key(key: str) -> str:
    """Row key of a work-record (group) row."""
    return f"w:{key}"


class ReceiptTable(DataTable[Text | str]):
    """A ``DataTable`` of receipts; posts :class:`ReceiptTable.EndReached` to page on."""

    DEFAULT_CSS = """
    ReceiptTable { height: 1fr; }
    ReceiptTable > .datatable--header { text-style: bold; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("end", "scroll_bottom", "Last row", show=False)
    ]

    class EndReached(Message):
        """The cursor reached the last loaded row: load the next page."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._keys: list[str] = []
        self._purpose_width = 0
        self._snapshot: Snapshot | None = None
        self._rebuilding = False

    def on_mount(self) -> None:
        self._columns_for(self.size.width or 80)

    def _columns_for(self, width: int) -> None:
        purpose = max(10, width - sum(FIXED.values()) - 2 * (len(FIXED) + 1) - 2)
        if purpose == self._purpose_width:
            return
        self._purpose_width = purpose
        self.clear(columns=True)
        self._keys = []
        for key, label in (("state", "State"), ("id", "Id"), ("tool", "Server/tool")):
            self.add_column(label, width=FIXED[key], key=key)
        self.add_column("Purpose", width=purpose, key="purpose")
        self.add_column("Observed", width=FIXED["observed"], key="observed")
        self.add_column("Expires", width=FIXED["expires"], key="expires")
        if self._snapshot is not None:
            self.show(self._snapshot)

    def on_resize(self) -> None:
        self._columns_for(self.size.width)

    # ---------------------------------------------------------------- rendering
    def _group_cells(self, group: Group) -> Cells:
        v = self.app.theme_variables
        if group.record is None:
            return (
                styled("—", "$text-muted", v),
                "",
                "",
                styled("(no work record)", "italic", v),
                "",
                "",
            )
        rec = group.record
        status = styled(rec.status[: FIXED["state"]], "bold $secondary", v)
        title = Text(rec.title, style="bold")
        if group.notes:
            title.append(f"  ✎{len(group.notes)} {group.notes[-1].text}", style="italic")
        if rec.completion_summary:
            title.append(f"  ✓ {rec.completion_summary}", style=v.get("success", ""))
        title.truncate(self._purpose_width, overflow="ellipsis")
        when = ago(self._snapshot.now, rec.updated_at) if self._snapshot is not None else ""
        return (
            status,
            rec.id[: FIXED["id"]],
            styled("work record", "$text-muted", v),
            title,
            when,
            "",
        )

    def _receipt_cells(self, snapshot: Snapshot, receipt: Receipt) -> Cells:
        v = self.app.theme_variables
        text, condition = observed(receipt, snapshot.now)
        expiry = countdown(snapshot.now, receipt.expires_at) if not receipt.is_terminal else ""
        expiry_cell = styled(
            expiry, "bold $warning" if near_expiry(receipt, snapshot.now) else "", v
        )
        tool = Text(f"{receipt.server}/{receipt.tool}")
        tool.truncate(FIXED["tool"], overflow="ellipsis")
        purpose = Text("  " + (receipt.purpose or receipt.status_message or ""))
        purpose.truncate(self._purpose_width, overflow="ellipsis")
        return (
            state_badge(receipt, v),
            receipt.receipt_id[-FIXED["id"] :],
            tool,
            purpose,
            styled(text.replace("observed ", ""), CONDITION_STYLE[condition], v),
            expiry_cell,
        )

    def _rows(self, snapshot: Snapshot) -> list[tuple[str, Cells]]:
        rows: list[tuple[str, Cells]] = []
        for group in snapshot.groups:
            rows.append((group_key(group.key or NO_WORK), self._group_cells(group)))
            for receipt in group.receipts:
                rows.append(
                    (receipt_key(receipt.receipt_id), self._receipt_cells(snapshot, receipt))
                )
        return rows

    def show(self, snapshot: Snapshot) -> None:
        """Render ``snapshot``, keeping the cursor on the same row key when possible."""
        self._snapshot = snapshot
        rows = self._rows(snapshot)
        keys = [key for key, _ in rows]
        if keys == self._keys:
            columns = list(self.columns)
            for key, cells in rows:
                for column, value in zip(columns, cells, strict=True):
                    self.update_cell(key, column, value)
            return
        current = self.cursor_key
        # Rebuilding moves the cursor; that must not read as "reached the end" (which
        # would page in the whole store).
        self._rebuilding = True
        try:
            self.clear()
            for key, cells in rows:
                self.add_row(*cells, key=key)
            self._keys = keys
        finally:
            self._rebuilding = False
        if current in keys:
            self.move_cursor(row=keys.index(current), animate=False)
        elif len(keys) > 1 and keys[0].startswith("w:"):
            self.move_cursor(row=1, animate=False)

    @property
    def cursor_key(self) -> str | None:
        """The key of the highlighted row (``r:<id>`` / ``w:<id>``), if any."""
        if not self._keys or not 0 <= self.cursor_row < len(self._keys):
            return None
        return self._keys[self.cursor_row]

    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        super().watch_cursor_coordinate(old, new)
        snapshot = self._snapshot
        if self._rebuilding or snapshot is None or not snapshot.more or len(self._keys) < 2:
            return
        if self.cursor_row >= len(self._keys) - 1:
            self.post_message(self.EndReached())
