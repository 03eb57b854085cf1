"""Textual messages carrying data from workers and engine events to the app.

Engine events arrive on the engine's thread; the bridge queues them and posts one
:class:`EventsArrived` that replaces a queued one, so a storm of "receipt changed"
becomes one drain of the queue (toolong's ``can_replace`` pattern). A publish request
coalesces the same way.
"""

from __future__ import annotations

from textual.message import Message


class EventsArrived(Message, bubble=False):
    """Engine events wait in the app's queue: drain it."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EventsArrived)


class PublishRequested(Message, bubble=False):
    """The model changed: build and publish a snapshot. Queued duplicates collapse."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PublishRequested)
