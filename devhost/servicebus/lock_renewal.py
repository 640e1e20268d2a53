"""A message's lock, renewed while its invocation runs -- and no longer, as the Service Bus processor under
the Functions host renews it (up to ``maxAutoLockRenewalDuration``; the renewal stops when the function
returns, so a message it leaves unsettled is redelivered once its lock lapses).

Most invocations end long before the first renewal is due, so nothing runs for a message until then: a
timer on the loop, which starts the renewing task when it fires (cancelled with the invocation)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from shared.amqp.async_receiver import AsyncEntityReceiver
from shared.amqp.received import ReceivedMessage

logger = logging.getLogger("devhost.ServiceBus")

# Runs a receiver call where the receiver may be used (the listener's receive loop) and returns its result.
LinkCall = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


class LockRenewal:
    """One message's renewal: a timer until the first renewal is due, then a task."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, delay: float, start: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        self._loop = loop
        self._start = start
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = loop.call_later(delay, self._begin)

    def _begin(self) -> None:
        self._timer = None
        self._task = self._loop.create_task(self._start())

    def cancel(self) -> None:
        """Stop renewing (the invocation ended)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()


MAX_RENEW_BUFFER_SECONDS = 10.0  # Azure.Messaging.ServiceBus Constants.MaximumRenewBufferDuration
RENEW_AT_ONCE_SECONDS = 0.4


def wait_before_renewing(locked_until: datetime) -> float:
    """Seconds until a lock held until ``locked_until`` is renewed, as the host's processor computes it
    (ReceiverManager.CalculateRenewDelay): with half of what remains left, at most 10 s before it lapses;
    at once when less than 0.4 s remains."""
    remaining = (locked_until - datetime.now(UTC)).total_seconds()
    if remaining < RENEW_AT_ONCE_SECONDS:
        return 0.0
    return remaining - min(remaining / 2, MAX_RENEW_BUFFER_SECONDS)


def renew_while_invoked(
    receiver: AsyncEntityReceiver,
    message: ReceivedMessage,
    *,
    max_seconds: float,
    function_name: str,
    via: LinkCall | None = None,
) -> LockRenewal | None:
    """Renew ``message``'s lock until cancelled (the invocation ended) or ``max_seconds`` have passed;
    through ``via`` when another coroutine receives on ``receiver`` meanwhile. None: the message has no
    lock to renew."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_seconds
    locked_until = message.locked_until_utc
    if locked_until is None:
        return None

    async def renewing() -> None:
        until: datetime = locked_until
        while True:
            if loop.time() >= deadline:
                return
            try:
                if via is not None:
                    until = await via(lambda: receiver.renew_message_lock(message))
                else:
                    until = await receiver.renew_message_lock(message)
            except Exception as exc:  # settled meanwhile, the lock already gone, the connection lost
                logger.warning(
                    "Functions.%s: cannot renew the lock of %s: %s", function_name, message.message_id, exc
                )
                return
            await asyncio.sleep(wait_before_renewing(until))

    return LockRenewal(loop, wait_before_renewing(locked_until), renewing)
