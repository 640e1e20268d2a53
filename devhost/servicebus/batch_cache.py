"""Minimum batch sizes for ``cardinality="many"`` Service Bus functions, as the host's extension holds them.

With ``extensions.serviceBus.minMessageBatchSize`` above 1 the extension (ServiceBusListener with its
ServiceBusMessageManager) does not invoke a batch function with whatever one receive returned: received
messages wait in a cache until it holds at least the minimum, and a batch then takes up to
``maxMessageBatchSize`` of them, oldest first. Messages that wait longer than ``maxBatchWaitTime`` (counted
from the receive that first left messages waiting) go out as a smaller batch. The rest of the cache goes out
when a session runs dry or is released, and when the host stops. Waiting messages are not lock-renewed
(batch functions never are), so a wait longer than the entity's lock duration loses their locks, in Azure
too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class BatchCache[T]:
    """Received messages waiting for a batch of at least ``min_size`` (the extension's message manager).

    Pure: the listener passes the loop's clock (``now``)."""

    def __init__(self, *, max_size: int, min_size: int, wait_seconds: float = 30.0) -> None:
        self.max_size = max_size
        self.min_size = min_size
        self.wait_seconds = wait_seconds  # maxBatchWaitTime
        self._waiting: deque[T] = deque()
        self.waiting_since: float | None = None  # loop time of the receive that first left messages here

    @property
    def enabled(self) -> bool:
        """Whether batches wait for a minimum at all (``minMessageBatchSize`` > 1, as the extension)."""
        return self.min_size > 1

    def __len__(self) -> int:
        return len(self._waiting)

    def take(self, received: Iterable[T] = (), *, partial: bool = False, now: float = 0.0) -> list[T]:
        """Add ``received``; return the next batch, or ``[]`` while fewer than the minimum wait (unless
        ``partial``). A batch holds at most ``max_size`` messages; what is left keeps waiting."""
        self._waiting.extend(received)
        if not self._waiting or (len(self._waiting) < self.min_size and not partial):
            if self._waiting and self.waiting_since is None:
                self.waiting_since = now
            return []
        batch = [self._waiting.popleft() for _ in range(min(self.max_size, len(self._waiting)))]
        # The extension restarts its wait cycle after every batch it dispatches.
        self.waiting_since = now if self._waiting else None
        return batch

    def due(self, now: float) -> bool:
        """Whether waiting messages have waited ``wait_seconds`` and go out as a partial batch."""
        return self.waiting_since is not None and now - self.waiting_since >= self.wait_seconds

    def next_batch(self, received: Iterable[T], now: float) -> list[T]:
        """What to invoke with after a receive: all of it without a minimum; else a batch of at least the
        minimum, or what waited its time out, or ``[]``."""
        if not self.enabled:
            return list(received)
        batch = self.take(received, now=now)
        if not batch and self.due(now):
            batch = self.take(partial=True, now=now)
        return batch

    def receive_wait(self, longest: float, now: float, *, shortest: float) -> float:
        """How long the next receive may wait: ``longest``, or less (not under ``shortest``) when waiting
        messages fall due before."""
        if self.waiting_since is None:
            return longest
        return max(shortest, min(longest, self.waiting_since + self.wait_seconds - now))
