"""A ``DataTable`` that draws a changed cell again alone: the rest of its line is reused.

Textual's ``DataTable`` draws a line by composing every cell of its row (then caches
the line). When one cell of a row changes — the receipts table's "12 s ago", every
second on every recent row — that composition, not the cell, was most of an open TUI's
CPU (``benchmarks/daemon.py --only tui``: ~5 ms a row under a profiler). Here
:meth:`CellTable.set_cells` writes the cells, keeps each changed row's drawn lines aside
and refreshes only the cells' regions; when such a line is drawn again in the same
state (cursor, hover, focus, scroll, the table's update count: the cache key Textual
uses), the new cells are rendered (through the table's own cell renderer, so they look
exactly as a full draw makes them) and spliced into the line drawn before. Anything
else — the cursor moved meanwhile, a style or theme changed, rows were added — draws
the line in full, as Textual does.

It reaches into ``DataTable``'s caches (Textual 8); on a Textual without them it falls
back to ``update_cell``, and ``tests/tui/test_tui_calm.py`` checks that the screen shows
the new text and that a tick composes no row.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

WHOLE_TABLE = 60
"""More changed cells than this are drawn by one redraw of the table, not cell by cell."""

WAS_LIMIT = 2000
"""Cells whose render before their change is kept as a template, at most."""

SegmentLines = list[list[Segment]]
"""A cell's render: its lines of segments (Textual's own alias is private)."""

K = TypeVar("K")
V = TypeVar("V")


class CellTable(DataTable[Text]):
    """A ``DataTable`` whose :meth:`set_cells` redraws the changed cells alone."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        # Line (virtual y) -> (changed column indexes, its lines as drawn before, by key).
        self._stale: dict[int, tuple[set[int], dict[Hashable, Strip]]] = {}
        # Cell -> its renders before it changed, by the rest of the cell cache's key,
        # each with the text it shows (a template for a text of the same shape).
        self._was: dict[Hashable, dict[Hashable, tuple[Text, SegmentLines]]] = {}

    def set_cells(self, changed: list[tuple[str, str, Text]]) -> None:
        """Write ``(row key, column key, value)`` cells and draw those cells again, alone.

        ``DataTable.update_cell`` counts an update, and the count is part of every key of
        the table's render caches: each call had Textual render every visible cell again.
        Here only the changed cells' cached renders are dropped, their rows' drawn lines
        are kept to be spliced (:meth:`_render_line`), and only the cells' regions are
        refreshed. When most of a screen changed (a filter keystroke) the whole table is
        drawn again once instead.
        """
        try:
            data = self._data
            cell_cache, row_cache = self._cell_render_cache, self._row_render_cache
            renderables, lines = self._row_renderable_cache, self._line_cache
        except AttributeError:  # pragma: no cover - another Textual's DataTable
            for key, column, value in changed:
                self.update_cell(key, column, value)
            return
        cells = {(RowKey(key), ColumnKey(column)) for key, column, _ in changed}
        shown = {cell: data[cell[0]][cell[1]] for cell in cells}
        for row_key, column_key, value in changed:
            data[RowKey(row_key)][ColumnKey(column_key)] = value
        if len(changed) > WHOLE_TABLE:
            self._update_count += 1  # every cache key changes: one full redraw
            self._stale.clear()
            self._was.clear()
            self.refresh()
            return
        rows = {row for row, _ in cells}
        if len(self._was) > WAS_LIMIT:
            self._was.clear()
        for cell_key in [k for k in cell_cache.keys() if (k[0], k[1]) in cells]:  # noqa: SIM118
            drawn = cell_cache.get(cell_key)
            if drawn is not None:
                cell = (cell_key[0], cell_key[1])
                self._was.setdefault(cell, {})[cell_key[2:]] = (shown[cell], drawn)
            cell_cache.discard(cell_key)
        _drop(row_cache, lambda k: k[0] in rows)
        indexes = {self.get_row_index(row) for row in rows}
        _drop(renderables, lambda k: k[1] in indexes)
        # Where each row and column starts (one pass each, not a sum per cell).
        tops, y = {}, self.header_height if self.show_header else 0
        for ordered in self.ordered_rows:
            tops[ordered.key] = (y, ordered.height)
            y += ordered.height
        lefts, x = [], self._row_label_column_width
        for spec in self.ordered_columns:
            lefts.append((x, spec.get_render_width(self)))
            x += lefts[-1][1]
        regions: list[Region] = []
        moved: dict[int, set[int]] = {}
        for row, col in cells:
            index = self.get_column_index(col)
            (top, height), (left, width) = tops[row], lefts[index]
            regions.append(Region(left, top, width, height))
            for line in range(top, top + height):
                moved.setdefault(line, set()).add(index)
        # The changed rows' drawn lines leave the line cache (a later draw in another
        # state must not find them) and wait to be spliced by the next draw in this one.
        for line_key in [k for k in lines.keys() if k[0] in moved]:  # noqa: SIM118 - LRUCache
            strip = lines.get(line_key)
            if strip is not None:
                self._stale.setdefault(line_key[0], (set(), {}))[1][line_key] = strip
            lines.discard(line_key)
        for y, columns in moved.items():
            self._stale.setdefault(y, (set(), {}))[0].update(columns)
        window = self.window_region
        offset = self.scroll_offset
        visible = [r.translate(-offset) for r in regions if window.overlaps(r)]
        if visible:
            self.refresh(*visible)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """Textual's line, or the line drawn before with its changed cells spliced in."""
        stale = self._stale.pop(y, None)
        if stale is not None:
            key = (
                y,
                x1,
                x2,
                self.size.width,
                self.cursor_coordinate,
                self.hover_coordinate,
                base_style,
                self.cursor_type,
                self._show_hover_cursor,
                self._update_count,
                self._pseudo_class_state,
            )
            columns, drawn = stale
            before = drawn.get(key)
            strip = self._splice(before, y, columns, base_style) if before is not None else None
            if strip is not None:
                self._line_cache[key] = strip
                return strip
        return super()._render_line(y, x1, x2, base_style)

    def _splice(self, before: Strip, y: int, columns: set[int], base_style: Style) -> Strip | None:
        """``before`` with the cells of ``columns`` rendered again; None if it cannot be."""
        if self.fixed_columns or self._should_render_row_labels or self.scroll_x:
            return None  # the line is not the row's cells side by side from x = 0
        try:
            row_key, line = self._get_offsets(y)
        except LookupError:
            return None
        row = self._row_locations.get(row_key)
        if row is None:
            return None  # the header
        style = self._get_row_style(row, base_style)
        cursor, hover, kind = self.cursor_coordinate, self.hover_coordinate, self.cursor_type
        parts: list[Strip] = []
        x = done = 0
        for index, column in enumerate(self.ordered_columns):
            width = column.get_render_width(self)
            if index in columns:
                at = Coordinate(row, index)
                cell = self._render_cell(
                    row,
                    index,
                    style,
                    width,
                    cursor=self._should_highlight(cursor, at, kind),
                    hover=self._should_highlight(hover, at, kind),
                )[line]
                parts += [before.crop(done, x), Strip(cell).adjust_cell_length(width, style)]
                done = x + width
            x += width
        if not parts:
            return None
        parts.append(before.crop(done))
        return Strip.join(parts).simplify()

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> SegmentLines:
        """Textual's cell render, or a changed cell's render before with its text replaced.

        "12 s ago" becoming "13 s ago" keeps every character's place and style: the
        render before is reused with the new characters instead of Rich rendering the
        cell again (most of a tick's cost after the splice).
        """
        if self._was and row_index >= 0 and column_index >= 0:
            row_key = self._row_locations.get_key(row_index)
            column_key = self._column_locations.get_key(column_index)
            rest = (
                base_style,
                cursor,
                hover,
                self._show_hover_cursor,
                self._update_count,
                self._pseudo_class_state,
            )
            before = self._was.get((row_key, column_key), {}).get(rest)
            if before is not None and row_key is not None and column_key is not None:
                value = self._data[row_key][column_key]
                lines = _retext(before[1], before[0], value, self.cell_padding)
                if lines is not None:
                    self._cell_render_cache[(row_key, column_key, *rest)] = lines
                    return lines
        return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._stale.clear()
        self._was.clear()

    def notify_style_update(self) -> None:
        self._stale.clear()
        self._was.clear()
        super().notify_style_update()


def _retext(lines: SegmentLines, old: object, new: object, pad: int) -> SegmentLines | None:
    """``lines`` (a render of ``old``) showing ``new`` instead; None if the shape differs.

    Only a one-line text replaced by another of the same length, style and layout, both
    printable ASCII (one cell a character), where ``old`` stands right after the padding.
    """
    if not (isinstance(old, Text) and isinstance(new, Text)) or len(lines) != 1:
        return None
    a, b = old.plain, new.plain
    same_shape = (
        len(a) == len(b)
        and a.isascii()
        and b.isascii()
        and a.isprintable()
        and b.isprintable()
        and not old.spans
        and not new.spans
        and str(old.style) == str(new.style)
        and (old.justify, old.overflow, old.no_wrap, old.end)
        == (new.justify, new.overflow, new.no_wrap, new.end)
    )
    line = lines[0]
    if not same_shape or "".join(s.text for s in line)[pad : pad + len(a)] != a:
        return None
    out: list[Segment] = []
    at = 0
    for segment in line:
        text, end = segment.text, at + len(segment.text)
        lo, hi = max(at, pad), min(end, pad + len(b))
        if lo < hi:
            text = text[: lo - at] + b[lo - pad : hi - pad] + text[hi - at :]
            segment = Segment(text, segment.style, segment.control)
        out.append(segment)
        at = end
    return [out]


def _drop(cache: LRUCache[K, V], stale: Callable[[K], bool]) -> None:
    """Discard the entries of ``cache`` whose key is ``stale``."""
    # Textual's LRUCache has keys() but no iteration of its own.
    for key in [k for k in cache.keys() if stale(k)]:  # noqa: SIM118
        cache.discard(key)
