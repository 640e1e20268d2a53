"""A message's lock, renewed while its invocation runs -- and no longer, as the Service Bus processor under
the Functions host renews it (up to ``maxAutoLockRenewalDuration``; the renewal stops when the function
returns, so a message it leaves unsettled is redelivered once its lock lapses)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusReceiver
from azure.servicebus.exceptions import ServiceBusError

logger = logging.getLogger("devhost.ServiceBus")

# Runs a receiver call where the receiver may be used (the listener's receive loop) and returns its result.
LinkCall = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def renew_while_invoked(
    receiver: ServiceBusReceiver,
    message: ServiceBusReceivedMessage,
    *,
    max_seconds: float,
    function_name: str,
    via: LinkCall | None = None,
) -> None:
    """Renew ``message``'s lock until cancelled (the invocation ended) or ``max_seconds`` have passed;
    through ``via`` when another coroutine receives on ``receiver`` meanwhile."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_seconds
    locked_until = message.locked_until_utc
    if locked_until is None:
        return
    period = max((locked_until - datetime.now(UTC)).total_seconds(), 1.0)
    while True:
        remaining = (locked_until - datetime.now(UTC)).total_seconds()
        # Renew with a third of the lock period left (at least 1 s), as the SDK's renewer margin.
        await asyncio.sleep(max(0.1, remaining - max(1.0, period / 3)))
        if loop.time() >= deadline:
            return
        try:
            if via is not None:
                locked_until = await via(lambda: receiver.renew_message_lock(message))
            else:
                locked_until = await receiver.renew_message_lock(message)
        except (ServiceBusError, ValueError) as exc:  # settled meanwhile, or the lock already gone
            logger.warning(
                "Functions.%s: cannot renew the lock of %s: %s", function_name, message.message_id, exc
            )
            return
