"""The receipts table: receipts grouped under their work records, in attention order.

The table holds one page of rows (the snapshot's window; never all 100,000) in fixed
slots: the ``DataTable``'s row keys are positions, and :attr:`ReceiptTable.keys` says
which receipt or work record each slot shows. A new snapshot rewrites only the cells
whose text changed, appends or removes rows only at the end, and never clears the
table; only the changed cells are drawn again (a clock tick that moves "12 s ago"
recomputes the time columns alone and repaints the cells that changed). When rows do
move, the highlighted receipt stays highlighted at the same height on screen: a person
reading a row never sees it jump away. The columns fit the width by priority: the
purpose keeps at least :data:`MIN_PURPOSE` characters, the id and the long freshness
text go first on a narrow terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.message import Message

from chit.tui.safe import one_line, plain_line
from chit.tui.view import NO_WORK, Group, Row, Snapshot, ago, countdown, near_expiry, observed
from chit.tui.widgets.badges import (
    CONDITION_STYLE,
    RECORD_STYLE,
    palette,
    state_badge,
    styled,
    verdict_badge,
)
from chit.tui.widgets.cell_table import CellTable

MIN_PURPOSE = 24
"""The purpose column never gets fewer characters than this while others can give way."""


@dataclass(frozen=True)
class Column:
    """One column: key, header, width (the purpose takes what is left)."""

    key: str
    label: str
    width: int


WIDE = (
    Column("state", "State", 9),
    Column("verdict", "Verdict", 10),
    Column("id", "Id", 6),
    Column("tool", "Server/tool", 18),
    Column("purpose", "Purpose", 0),
    Column("observed", "Observed", 16),
    Column("expires", "Expires", 8),
)
"""Every column at full width, left to right."""

GIVE_WAY: tuple[tuple[str, Column | None], ...] = (
    ("id", None),
    ("observed", Column("observed", "Seen", 5)),
    ("tool", Column("tool", "Server/tool", 14)),
    ("expires", Column("expires", "TTL", 6)),
    ("tool", Column("tool", "Server/tool", 12)),
)
"""What gives way, in order, until the purpose has :data:`MIN_PURPOSE` characters."""

Cells = tuple[Text, ...]


def layout(width: int) -> tuple[tuple[Column, ...], int]:
    """The columns that fit ``width`` and the purpose's width."""
    columns = list(WIDE)

    def purpose_width() -> int:
        # Each column has one cell of padding on both sides; 2 more for the scrollbar.
        return width - sum(c.width for c in columns) - 2 * len(columns) - 2

    for key, replacement in GIVE_WAY:
        if purpose_width() >= MIN_PURPOSE:
            break
        i = next(i for i, c in enumerate(columns) if c.key == key)
        if replacement is None:
            del columns[i]
        else:
            columns[i] = replacement
    return tuple(columns), max(10, purpose_width())


def receipt_key(receipt_id: str) -> str:
    """Row key of a receipt row."""
    return f"r:{receipt_id}"


def group_key(key: str) -> str:
    """Row key of a work-record (group) row."""
    return f"w:{key}"


def short_ago(text: str) -> str:
    """``12 s ago`` → ``12s`` (the narrow freshness column)."""
    number, _, unit = text.partition(" ")
    return number + {"s": "s", "min": "m", "h": "h", "d": "d"}.get(unit.split(" ")[0], "")


class ReceiptTable(CellTable):
    """A ``DataTable`` of receipts; posts :class:`ReceiptTable.EndReached` to page on."""

    DEFAULT_CSS = """
    ReceiptTable { height: 1fr; }
    ReceiptTable > .datatable--header { text-style: bold; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("end", "scroll_bottom", "Last row", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    class EndReached(Message):
        """The cursor reached the last loaded row: load the next page."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._keys: list[str] = []
        self._shown: list[Cells] = []
        self._columns: tuple[Column, ...] = ()
        self._purpose_width = 0
        self._snapshot: Snapshot | None = None
        self._rebuilding = False
        self._theme = ""

    def on_mount(self) -> None:
        self._columns_for(self.size.width or 80)

    def _columns_for(self, width: int) -> None:
        columns, purpose = layout(width)
        if columns == self._columns and purpose == self._purpose_width:
            return
        self._columns, self._purpose_width = columns, purpose
        current = self.cursor_key
        self.clear(columns=True)
        self._keys, self._shown = [], []
        for column in columns:
            self.add_column(column.label, width=column.width or purpose, key=column.key)
        if self._snapshot is not None:
            self.show(self._snapshot, keep=current)

    def on_resize(self) -> None:
        self._columns_for(self.size.width)

    # ---------------------------------------------------------------- rendering
    def _group_cells(self, group: Group) -> dict[str, Text]:
        v = palette(self.app.theme_variables)
        if group.record is None:
            return {"purpose": styled("(no work record)", "italic $foreground", v)}
        rec = group.record
        title = plain_line(rec.title, "bold")
        if group.notes:
            title.append(f"  ✎{len(group.notes)} ")
            title.append(one_line(group.notes[-1].text), style="italic")
        if rec.completion_summary:
            title.append("  ✓ ", style=v.get("text-success", ""))
            title.append(one_line(rec.completion_summary))
        title.truncate(self._purpose_width, overflow="ellipsis")
        return {
            "state": styled(one_line(rec.status)[:9], RECORD_STYLE, v),
            "id": Text(rec.id[:6]),
            "tool": Text("work record"),
            "purpose": title,
            **self._group_clock(group),
        }

    def _group_clock(self, group: Group) -> dict[str, Text]:
        """The group row's cells that move with the clock alone."""
        rec = group.record
        if rec is None:
            return {}
        now = self._snapshot.now if self._snapshot is not None else rec.updated_at
        return {"observed": Text(self._ago(ago(now, rec.updated_at)))}

    def _ago(self, text: str) -> str:
        narrow = any(c.key == "observed" and c.width < 10 for c in self._columns)
        return short_ago(text) if narrow else text

    def _receipt_cells(self, snapshot: Snapshot, receipt: Row) -> dict[str, Text]:
        v = palette(self.app.theme_variables)
        tool = plain_line(f"{receipt.server}/{receipt.tool}")
        purpose = plain_line(receipt.purpose or receipt.status_message or "")
        purpose.truncate(self._purpose_width, overflow="ellipsis")
        return {
            "state": state_badge(receipt, v),
            "verdict": verdict_badge(receipt, v),
            "id": Text(receipt.receipt_id[-6:]),
            "tool": tool,
            "purpose": purpose,
            **self._receipt_clock(snapshot, receipt),
        }

    def _receipt_clock(self, snapshot: Snapshot, receipt: Row) -> dict[str, Text]:
        """The receipt row's cells that move with the clock alone: freshness, expiry."""
        v = palette(self.app.theme_variables)
        text, condition = observed(receipt, snapshot.now)
        text = text.replace("observed ", "")
        narrow = any(c.key == "observed" and c.width < 10 for c in self._columns)
        if narrow:
            text = short_ago(text.split(", ")[-1]) + ("!" if ", " in text else "")
        expiry = countdown(snapshot.now, receipt.expires_at) if not receipt.is_terminal else ""
        near = near_expiry(receipt, snapshot.now)
        return {
            "observed": styled(text, CONDITION_STYLE[condition], v),
            "expires": styled(expiry, "bold $text-warning" if near else "$foreground", v),
        }

    def _row(self, cells: dict[str, Text]) -> Cells:
        return tuple(cells.get(c.key, Text("")) for c in self._columns)

    def _rows(self, snapshot: Snapshot) -> list[tuple[str, Cells]]:
        rows: list[tuple[str, Cells]] = []
        for group in snapshot.groups:
            rows.append((group_key(group.key or NO_WORK), self._row(self._group_cells(group))))
            for receipt in group.rows:
                cells = self._row(self._receipt_cells(snapshot, receipt))
                rows.append((receipt_key(receipt.receipt_id), cells))
        return rows

    def _clock_rows(self, snapshot: Snapshot) -> list[tuple[str, Cells]]:
        """The rows shown now with only their clock-driven cells computed again."""
        rows: list[tuple[str, Cells]] = []
        for group in snapshot.groups:
            key = group_key(group.key or NO_WORK)
            rows.append((key, self._merge(len(rows), self._group_clock(group))))
            for receipt in group.rows:
                key = receipt_key(receipt.receipt_id)
                moved = self._receipt_clock(snapshot, receipt)
                rows.append((key, self._merge(len(rows), moved)))
        return rows

    def _merge(self, slot: int, moved: dict[str, Text]) -> Cells:
        shown = self._shown[slot]
        return tuple(moved.get(c.key, shown[i]) for i, c in enumerate(self._columns))

    def show(self, snapshot: Snapshot, keep: str | None = None) -> None:
        """Render ``snapshot``; the highlighted row keeps its receipt and its height."""
        previous, self._snapshot = self._snapshot, snapshot
        if (
            previous is not None
            and snapshot.groups is previous.groups
            and self._keys
            and self._theme == self.app.theme
        ):
            # The same rows at a later time (a clock tick, chit.tui.feed): only the
            # freshness and expiry cells can differ.
            self._write(self._clock_rows(snapshot))
            return
        self._theme = self.app.theme
        rows = self._rows(snapshot)
        keys = [key for key, _ in rows]
        if keys == self._keys:
            self._write(rows)
            return
        current = keep or self.cursor_key
        offset = self.cursor_row - round(self.scroll_y)
        # Rewriting moves the cursor; that must not read as "reached the end" (which
        # would page in more rows).
        self._rebuilding = True
        try:
            self._write(rows)
            self._keys = keys
            if current in keys:
                row = keys.index(current)
                self.move_cursor(row=row, animate=False, scroll=False)
                # After the refresh: the new rows must be measured before scrolling.
                target = max(0, row - offset)
                self.call_after_refresh(self.scroll_to, y=target, animate=False)
            elif len(keys) > 1 and keys[0].startswith("w:"):
                self.move_cursor(row=1, animate=False)
            elif keys:
                self.move_cursor(row=0, animate=False)
        finally:
            self._rebuilding = False

    def _write(self, rows: list[tuple[str, Cells]]) -> None:
        """Put ``rows`` in the slots: changed cells rewritten, rows added or cut at the end."""
        columns = [c.key for c in self._columns]
        shown = self._shown
        if not rows:
            self.clear()
            shown.clear()
            return
        changed: list[tuple[str, str, Text]] = []
        for slot, (_, cells) in enumerate(rows):
            if slot == len(shown):
                self.add_row(*cells, key=str(slot))
                shown.append(cells)
                continue
            before = shown[slot]
            if _same(before, cells):
                continue
            for i, (column, value) in enumerate(zip(columns, cells, strict=True)):
                if not _same((before[i],), (value,)):
                    changed.append((str(slot), column, value))
            shown[slot] = cells
        while len(shown) > len(rows):
            shown.pop()
            self.remove_row(str(len(shown)))
        if changed:
            self.set_cells(changed)

    @property
    def keys(self) -> list[str]:
        """What each row shows, top to bottom: ``r:<receipt id>`` or ``w:<work record>``."""
        return list(self._keys)

    def cell(self, key: str, column: str) -> Text:
        """The cell of ``column`` in the row that shows ``key``."""
        return self.get_cell(str(self._keys.index(key)), column)

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


def _same(a: Cells, b: Cells) -> bool:
    """Cells look the same (``Text ==`` ignores the base style, which carries colour)."""
    # A clock tick keeps most cells as the same objects: those need no comparing.
    return len(a) == len(b) and all(
        x is y or (x.plain == y.plain and str(x.style) == str(y.style) and x.spans == y.spans)
        for x, y in zip(a, b, strict=True)
    )
