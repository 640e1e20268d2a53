"""Names of spans and attributes: OpenTelemetry's messaging semantic conventions for Azure Service Bus
(https://opentelemetry.io/docs/specs/semconv/messaging/azure-messaging/) and Busbar's own ``busbar.*``."""

from __future__ import annotations

from typing import Final

INSTRUMENTATION_SCOPE: Final = "busbar"
"""The tracer's and meter's name (the instrumentation scope a backend groups Busbar's telemetry under)."""

MESSAGING_SYSTEM: Final = "messaging.system"
SERVICEBUS: Final = "servicebus"
"""``messaging.system``'s value for Azure Service Bus, as the conventions and azure-servicebus spell it."""
OPERATION_NAME: Final = "messaging.operation.name"
OPERATION_TYPE: Final = "messaging.operation.type"
DESTINATION_NAME: Final = "messaging.destination.name"
SUBSCRIPTION_NAME: Final = "messaging.destination.subscription.name"
MESSAGE_ID: Final = "messaging.message.id"
CONVERSATION_ID: Final = "messaging.message.conversation_id"
BATCH_COUNT: Final = "messaging.batch.message_count"
DELIVERY_COUNT: Final = "messaging.servicebus.message.delivery_count"
ENQUEUED_TIME: Final = "messaging.servicebus.message.enqueued_time"
DISPOSITION_STATUS: Final = "messaging.servicebus.disposition_status"
ERROR_TYPE: Final = "error.type"

ENDPOINT: Final = "busbar.endpoint"
CONTRACT: Final = "busbar.contract"
OUTCOME: Final = "busbar.outcome"
DEAD_LETTER_REASON: Final = "busbar.dead_letter.reason"
DEAD_LETTER_DESCRIPTION: Final = "busbar.dead_letter.description"
ARCHIVE_REASON: Final = "busbar.archive.reason"

# messaging.operation.type values (the conventions' well-known ones).
SEND: Final = "send"
PROCESS: Final = "process"
SETTLE: Final = "settle"

# Dispositions (messaging.servicebus.disposition_status: the conventions' values).
COMPLETE: Final = "complete"
ABANDON: Final = "abandon"
DEAD_LETTER: Final = "dead_letter"

# busbar.outcome values: shared.delivery.Outcome (the monitoring counts the same outcomes).


def span_name(operation: str, destination: str) -> str:
    """``"{operation} {destination}"``: the conventions' span name (e.g. ``process billing``)."""
    return f"{operation} {destination}" if destination else operation
