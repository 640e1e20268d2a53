"""Explicit settlement for SDK-type bindings, mirroring ``azurefunctions-extensions-bindings-servicebus``.

A function whose trigger parameter is annotated ``azure.servicebus.ServiceBusReceivedMessage`` (or a list
of them) receives the SDK's own received message; a parameter annotated with any class named
``ServiceBusMessageActions`` (the extension's, or :class:`ServiceBusMessageActions` here) receives an object
with the extension's synchronous methods: ``complete``, ``abandon``, ``deadletter``, ``defer`` and
``renew_message_lock``.

Calls from a plain (threaded) function settle at once on the listener's receiver. Calls from a coroutine
function cannot block the event loop, so they are queued and applied as soon as the function returns,
before auto-completion; either way a message settled by the function is never settled again by the host.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusReceiver

logger = logging.getLogger("devhost.settlement")


@dataclass(slots=True)
class SettlementTracker:
    """Which messages of one invocation are settled, and settlements queued by coroutine functions."""

    receiver: ServiceBusReceiver
    loop: asyncio.AbstractEventLoop
    settled: set[int] = field(default_factory=set)  # ids of messages settled through the actions object
    pending: list[Callable[[], Awaitable[Any]]] = field(default_factory=list)

    def is_settled(self, message: ServiceBusReceivedMessage) -> bool:
        """Whether the function settled ``message`` itself."""
        return id(message) in self.settled

    async def apply_pending(self) -> None:
        """Run settlements requested by a coroutine function, in order."""
        while self.pending:
            await self.pending.pop(0)()


class ServiceBusMessageActions:
    """What a function uses to settle its messages itself (the extension's API)."""

    def __init__(self, tracker: SettlementTracker) -> None:
        self._tracker = tracker

    def _run(self, message: ServiceBusReceivedMessage, action: Callable[[], Awaitable[Any]]) -> None:
        tracker = self._tracker
        tracker.settled.add(id(message))
        if _on_loop(tracker.loop):
            tracker.pending.append(action)
            return

        async def call() -> Any:
            return await action()

        asyncio.run_coroutine_threadsafe(call(), tracker.loop).result(60)

    def complete(self, message: ServiceBusReceivedMessage) -> None:
        """Complete: the message is removed."""
        self._run(message, lambda: self._tracker.receiver.complete_message(message))

    def abandon(self, message: ServiceBusReceivedMessage) -> None:
        """Abandon: the lock is released and the delivery count grows."""
        self._run(message, lambda: self._tracker.receiver.abandon_message(message))

    def deadletter(
        self,
        message: ServiceBusReceivedMessage,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        """Move the message to the dead-letter queue with a reason and description."""
        self._run(
            message,
            lambda: self._tracker.receiver.dead_letter_message(
                message, reason=deadletter_reason, error_description=deadletter_error_description
            ),
        )

    def defer(self, message: ServiceBusReceivedMessage) -> None:
        """Defer: the message stays, retrievable only by sequence number."""
        self._run(message, lambda: self._tracker.receiver.defer_message(message))

    def renew_message_lock(self, message: ServiceBusReceivedMessage) -> None:
        """Renew the message's lock now (the host renews automatically too)."""
        tracker = self._tracker

        async def renew() -> Any:
            return await tracker.receiver.renew_message_lock(message)

        if _on_loop(tracker.loop):
            tracker.pending.append(renew)
            return
        asyncio.run_coroutine_threadsafe(renew(), tracker.loop).result(60)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def is_actions_annotation(annotation: Any) -> bool:
    """Whether a parameter annotation asks for a message-actions object."""
    return getattr(annotation, "__name__", None) == "ServiceBusMessageActions" or (
        isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "ServiceBusMessageActions"
    )
