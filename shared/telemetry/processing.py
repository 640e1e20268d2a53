"""The processing span of one delivery to an endpoint, its settlement, and the processing metrics.

The span *continues* the message's trace (its parent is the context the message carries) rather than
starting a new trace linked to it. NServiceBus 10 does the former for sends and, by default, the latter for
publishes; OpenTelemetry's messaging conventions allow either ("process" spans may be children of the
creation context or link to it). Busbar makes it a child because one event's whole story (publish →
billing → ``InvoiceIssued`` → shipping) is then one trace an operator can open by one id, which is what
following an event needs; a fan-out of one publish to several endpoints shows as sibling process spans.
Operations that act on a message *again* (re-drive, console retry, replay, the router's bridge) start a new
trace linked to the original instead (:mod:`shared.telemetry.operations`): their cause is an operator or a
timer, not the publish.

Settlement is observed through the trigger's own settlement object (:class:`ObservedSettlement`): the span
gets ``messaging.servicebus.disposition_status`` and Busbar's outcome, and a dead-lettering an event with
its reason and description.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from shared.contracts import ENCLOSED_MESSAGE_TYPES, parse_enclosed_types
from shared.telemetry import conventions as c
from shared.telemetry import instruments
from shared.telemetry.propagation import context_from_properties, joined

tracer = trace.get_tracer(c.INSTRUMENTATION_SCOPE)


class Settlement(Protocol):
    """The settlement calls of a Service Bus trigger's ``ServiceBusMessageActions``."""

    def complete(self, message: Any) -> None: ...

    def abandon(self, message: Any) -> None: ...

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None: ...


class ObservedSettlement:
    """Settles through ``actions`` and records each settlement on ``span`` (and as the delivery's
    outcome)."""

    def __init__(self, actions: Settlement, span: Span) -> None:
        self._actions = actions
        self._span = span
        self.outcome: str | None = None

    def complete(self, message: Any) -> None:
        """Complete ``message``: handled."""
        self._actions.complete(message)
        self._settled(c.COMPLETE, c.HANDLED)

    def abandon(self, message: Any) -> None:
        """Abandon ``message``: it will be delivered again."""
        self._actions.abandon(message)
        self._settled(c.ABANDON, c.RETRIED)

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        """Dead-letter ``message``; the reason and description go on the span as an event."""
        self._actions.deadletter(
            message,
            deadletter_reason=deadletter_reason,
            deadletter_error_description=deadletter_error_description,
        )
        self._span.add_event(
            "dead_lettered",
            {
                c.DEAD_LETTER_REASON: deadletter_reason or "",
                c.DEAD_LETTER_DESCRIPTION: deadletter_error_description or "",
            },
        )
        self._span.set_attribute(c.DEAD_LETTER_REASON, deadletter_reason or "")
        self._span.set_status(Status(StatusCode.ERROR, deadletter_reason))
        self._settled(c.DEAD_LETTER, c.DEAD_LETTERED)

    def _settled(self, disposition: str, outcome: str) -> None:
        self.outcome = outcome
        self._span.set_attribute(c.DISPOSITION_STATUS, disposition)
        self._span.set_attribute(c.OUTCOME, outcome)


def contract_of(properties: Mapping[Any, Any] | None) -> str:
    """The message's contract: the first type its ``NServiceBus.EnclosedMessageTypes`` names ("" when
    none)."""
    if not properties:
        return ""
    raw = properties.get(ENCLOSED_MESSAGE_TYPES, properties.get(ENCLOSED_MESSAGE_TYPES.encode()))
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    names = parse_enclosed_types(raw) if isinstance(raw, str) else []
    return names[0] if names else ""


def delivery_attributes(
    endpoint: str,
    queue: str,
    *,
    message_id: str | None,
    delivery_count: int | None,
    enqueued_time: datetime | None,
    contract: str,
) -> dict[str, AttributeValue]:
    """The process span's attributes (the conventions' for Service Bus, and ``busbar.*``)."""
    attributes: dict[str, AttributeValue] = {
        c.MESSAGING_SYSTEM: c.SERVICEBUS,
        c.OPERATION_NAME: c.PROCESS,
        c.OPERATION_TYPE: c.PROCESS,
        c.DESTINATION_NAME: queue,
        c.ENDPOINT: endpoint,
        c.CONTRACT: contract,
    }
    if message_id is not None:
        attributes[c.MESSAGE_ID] = str(message_id)
    if delivery_count is not None:
        attributes[c.DELIVERY_COUNT] = delivery_count
    if enqueued_time is not None:
        # The conventions give it as a Unix epoch in seconds.
        attributes[c.ENQUEUED_TIME] = int(enqueued_time.timestamp())
    return attributes


@contextmanager
def processing(
    endpoint: str,
    queue: str,
    *,
    properties: Mapping[Any, Any] | None,
    actions: Settlement,
    message_id: str | None = None,
    delivery_count: int | None = None,
    enqueued_time: datetime | None = None,
) -> Iterator[ObservedSettlement]:
    """The ``process <queue>`` span (a CONSUMER span, the current one inside the block, so handlers'
    outgoing messages carry it on) of one delivery to ``endpoint``, a child of the context the message's
    ``properties`` carry; yields the settlement to settle through. On exit the processing metrics are
    recorded with the endpoint, contract and outcome (``failed`` when the block raised before settling)."""
    contract = contract_of(properties)
    attributes = delivery_attributes(
        endpoint,
        queue,
        message_id=message_id,
        delivery_count=delivery_count,
        enqueued_time=enqueued_time,
        contract=contract,
    )
    started = time.perf_counter()
    with tracer.start_as_current_span(
        c.span_name(c.PROCESS, queue),
        context=joined(context_from_properties(properties)),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
    ) as span:
        observed = ObservedSettlement(actions, span)
        try:
            yield observed
        except BaseException as error:
            span.set_attribute(c.ERROR_TYPE, type(error).__qualname__)
            raise
        finally:
            outcome = observed.outcome or c.FAILED
            span.set_attribute(c.OUTCOME, outcome)
            _record(endpoint, queue, contract, outcome, time.perf_counter() - started, enqueued_time)


def _record(
    endpoint: str,
    queue: str,
    contract: str,
    outcome: str,
    seconds: float,
    enqueued_time: datetime | None,
) -> None:
    labels = {c.ENDPOINT: endpoint, c.CONTRACT: contract, c.DESTINATION_NAME: queue}
    instruments.consumed.add(1, labels)
    instruments.process_duration.record(seconds, {**labels, c.OUTCOME: outcome})
    if outcome == c.HANDLED:
        instruments.successes.add(1, labels)
        instruments.processing_time.record(seconds, labels)
        if enqueued_time is not None:
            # The SDK's enqueued_time_utc is aware; a naive one is UTC all the same.
            enqueued = enqueued_time if enqueued_time.tzinfo else enqueued_time.replace(tzinfo=UTC)
            late = (datetime.now(UTC) - enqueued).total_seconds()
            instruments.critical_time.record(max(late, 0.0), labels)
    else:
        instruments.failures.add(1, {**labels, c.OUTCOME: outcome})
    if outcome == c.DEAD_LETTERED:
        instruments.dead_lettered.add(1, labels)
