"""Rate limiters for senders: how many messages per second a loop may hand to Service Bus.

Two algorithms, for two kinds of caller:

- :class:`TokenBucket` (the dead-letter re-drive): message by message, with a burst of up to one
  second's worth after idle time, then spaced to the rate.
- :class:`BatchPacer` (the Spark replay's send tasks): whole batches, each starting once the previous
  batch's share of the rate has passed; the first goes at once and idle time is not banked, so a task never
  bursts above its share of the namespace-wide rate.

Both take an injectable clock and sleep (tests), and ``acquire(n)`` blocks until ``n`` messages may go.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """A token bucket: ``acquire(n)`` waits until ``n`` more messages fit ``rate`` per second."""

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self._clock = clock
        self._sleep = sleep
        self._capacity = max(1.0, rate)  # at most one second's worth in a burst
        self._tokens = self._capacity
        self._last = clock()

    def acquire(self, count: int) -> None:
        """Take ``count`` tokens, sleeping as long as needed (``count`` may exceed the burst size)."""
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= count
        if self._tokens < 0:
            wait = -self._tokens / self.rate
            self._sleep(wait)
            self._last = self._clock()
            self._tokens = 0.0


class BatchPacer:
    """Spaces batches so a task averages ``rate`` messages per second (0: no limit).

    A batch of n messages may start once the previous one's n/rate seconds have passed; the first goes at
    once."""

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._rate = rate
        self._clock = clock
        self._sleep = sleep
        self._next_start: float | None = None

    def acquire(self, messages: int) -> None:
        """Block until a batch of ``messages`` may be sent."""
        if self._rate <= 0:
            return
        now = self._clock()
        start = now if self._next_start is None else max(self._next_start, now)
        if start > now:
            self._sleep(start - now)
        self._next_start = start + messages / self._rate
