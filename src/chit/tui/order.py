"""The display order: work records by their most urgent member, members by attention.

The main view must hold still: a receipt only moves when its attention group changes,
and within a group the order is the acceptance time. Sorting 100,000 receipts on every
change would cost tens of milliseconds, so each work record keeps its members in a
sorted list and the records themselves are kept in a sorted list by their first
member (the *head*); a change moves one entry with a few ``bisect`` calls.

Each record also keeps its members per lifecycle state, and each state a sorted list of
the records that have members in it, so a ``state:`` filter visits only that state's
entries: ``state:failed`` no longer tests the 45,000 input-required and working entries
that come before the first failed one in attention order.

No Textual here; the index changes the order on the UI thread only.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from chit.tui.entry import Entry

Key = tuple[int, str, str]
"""An entry's :attr:`~chit.tui.entry.Entry.sort_key`: attention, acceptance time, id."""

Place = tuple[Key, str]
"""A work record's place: its head's key, then its key (unique: the head's id is)."""


@dataclass
class _Group:
    members: list[Key] = field(default_factory=list)
    by_state: dict[str, list[Key]] = field(default_factory=dict)
    """The members in each state (only states with members), each list sorted."""

    @property
    def head(self) -> Key:
        return self.members[0]


def _insort(places: list[Place], place: Place) -> None:
    bisect.insort(places, place)


def _drop(places: list[Place], place: Place) -> None:
    i = bisect.bisect_left(places, place)
    if i < len(places) and places[i] == place:
        del places[i]


class AttentionOrder:
    """Every entry's place in the display order, with per-state views; see the module doc."""

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._groups: dict[str, _Group] = {}
        self._order: list[Place] = []
        self._by_state: dict[str, list[Place]] = {}
        pairs: dict[str, list[tuple[Key, str]]] = {}
        for entry in entries:
            pairs.setdefault(entry.work_ref, []).append((entry.sort_key, entry.state))
        for work_ref, members in pairs.items():
            members.sort()
            group = self._groups[work_ref] = _Group([key for key, _ in members])
            for key, state in members:  # in order: each state's list comes out sorted
                group.by_state.setdefault(state, []).append(key)
            place = (group.head, work_ref)
            self._order.append(place)
            for state in group.by_state:
                self._by_state.setdefault(state, []).append(place)
        self._order.sort()
        for places in self._by_state.values():
            places.sort()

    def has_group(self, work_ref: str) -> bool:
        """True when ``work_ref`` has at least one entry."""
        return work_ref in self._groups

    def position(self, entry: Entry) -> tuple[Key, str, Key]:
        """Where an indexed ``entry`` is in the display order (a sort key)."""
        return (self._groups[entry.work_ref].head, entry.work_ref, entry.sort_key)

    # ------------------------------------------------------------------ changes
    def place(self, entry: Entry) -> None:
        """Put ``entry`` (not in the order now) at its place."""
        work_ref, state, key = entry.work_ref, entry.state, entry.sort_key
        group = self._groups.get(work_ref)
        if group is None:
            group = self._groups[work_ref] = _Group()
        old_head = group.head if group.members else None
        bisect.insort(group.members, key)
        new_state = state not in group.by_state
        bisect.insort(group.by_state.setdefault(state, []), key)
        head = group.head
        if head != old_head:
            if old_head is not None:  # the record moves: in the order and in its states'
                _drop(self._order, (old_head, work_ref))
                for other in group.by_state:
                    if other != state or not new_state:
                        places = self._by_state[other]
                        _drop(places, (old_head, work_ref))
                        _insort(places, (head, work_ref))
            _insort(self._order, (head, work_ref))
        if new_state:
            _insort(self._by_state.setdefault(state, []), (head, work_ref))

    def unplace(self, entry: Entry) -> None:
        """Take ``entry`` (at the place its fields give) out of the order."""
        work_ref, state, key = entry.work_ref, entry.state, entry.sort_key
        group = self._groups[work_ref]
        old_head = group.head
        _remove(group.members, key)
        same = group.by_state[state]
        _remove(same, key)
        if not same:
            del group.by_state[state]
            _drop(self._by_state[state], (old_head, work_ref))
        if not group.members:
            del self._groups[work_ref]
            _drop(self._order, (old_head, work_ref))
            return
        head = group.head
        if head != old_head:
            _drop(self._order, (old_head, work_ref))
            _insort(self._order, (head, work_ref))
            for other in group.by_state:
                places = self._by_state[other]
                _drop(places, (old_head, work_ref))
                _insort(places, (head, work_ref))

    # ------------------------------------------------------------------ reading
    def runs(self, states: frozenset[str] | None, work_ref: str | None) -> Iterator[Iterable[Key]]:
        """Per work record in display order, its members (of ``states`` only) in order.

        One step per record, not per entry: the caller's loop over the members is the
        filter's hot loop. ``work_ref`` limits it to one record.
        """
        groups = self._groups
        if work_ref is not None:
            group = groups.get(work_ref)
            if group is not None:
                yield self._members(group, states)
            return
        if states is None:
            for _, key in self._order:
                yield groups[key].members
            return
        if len(states) == 1:
            (state,) = states
            for _, key in self._by_state.get(state, ()):
                yield groups[key].by_state[state]
            return
        last = None
        for place in heapq.merge(*(self._by_state.get(s, ()) for s in states)):
            if place != last:  # a record with members in two of the states comes twice
                last = place
                yield self._members(groups[place[1]], states)

    @staticmethod
    def _members(group: _Group, states: frozenset[str] | None) -> Iterable[Key]:
        if states is None:
            return group.members
        runs: list[Sequence[Key]] = [group.by_state[s] for s in states if s in group.by_state]
        return runs[0] if len(runs) == 1 else heapq.merge(*runs)


def _remove(keys: list[Key], key: Key) -> None:
    i = bisect.bisect_left(keys, key)
    if i < len(keys) and keys[i] == key:
        del keys[i]
