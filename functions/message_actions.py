"""The settlement interface Busbar's Service Bus functions use.

In Azure, a function gets explicit settlement by annotating its parameters with the SDK-type binding classes
of ``azurefunctions-extensions-bindings-servicebus`` (``ServiceBusReceivedMessage`` and
``ServiceBusMessageActions``), and devhost binds those same classes (the extension's converter and its gRPC
settlement client). That package ships no type information, so the function code types the actions object
with this Protocol, a typing aid only: the part of the extension's ``ServiceBusMessageActions`` Busbar relies
on, with the extension's own parameter names.
"""

from __future__ import annotations

from typing import Protocol

from azure.servicebus import ServiceBusReceivedMessage


class MessageActions(Protocol):
    """Explicit settlement of the trigger's message."""

    def complete(self, message: ServiceBusReceivedMessage) -> None:
        """Remove ``message`` from its entity: it was handled."""

    def abandon(self, message: ServiceBusReceivedMessage) -> None:
        """Release ``message`` for redelivery now (its delivery count goes up)."""

    def deadletter(
        self,
        message: ServiceBusReceivedMessage,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        """Move ``message`` to its entity's dead-letter queue now."""
