"""The settlement interface a Service Bus function asks for with a ``ServiceBusMessageActions`` parameter.

The Functions host injects the message-actions object by the parameter's annotation (the class name
``ServiceBusMessageActions``, as in ``azurefunctions-extensions-bindings-servicebus``); this Protocol is the
part of it Busbar uses, so the function code type-checks without depending on the extension package.
"""

from __future__ import annotations

from typing import Protocol

from azure.servicebus import ServiceBusReceivedMessage


class ServiceBusMessageActions(Protocol):
    """Explicit settlement of the trigger's message."""

    def deadletter(
        self,
        message: ServiceBusReceivedMessage,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        """Move ``message`` to its entity's dead-letter queue now."""
