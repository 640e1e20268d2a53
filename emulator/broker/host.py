"""What a message queue needs of its namespace, as a Protocol, so queues never import the namespace.

:class:`TimerHost` is the part session handling (:mod:`emulator.broker.queue_sessions`) uses; the queue's
own :class:`~emulator.broker.queue.QueueHost` adds the calls that hand a queue or message back to the
namespace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from emulator.broker.store import Store

__all__ = ["TimerHost"]


class TimerHost(Protocol):
    """The namespace's store, clock and timers."""

    @property
    def store(self) -> Store: ...

    def now_ms(self) -> int:
        """The namespace clock, in milliseconds since the epoch."""
        ...

    def call_at_ms(self, when_ms: int, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        """Run ``callback(*args)`` on the event loop at ``when_ms`` (namespace clock)."""
        ...
