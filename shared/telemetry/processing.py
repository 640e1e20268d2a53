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

Settlement is observed once, through the trigger's own settlement object
(:class:`shared.delivery.ObservedSettlement`), with one timer; at the end of the delivery its
:class:`~shared.delivery.Observation` goes on the span (``messaging.servicebus.disposition_status``,
Busbar's outcome, and a dead-lettering as an event with its reason and description), into the processing
metrics, and to the caller's observers (the console's monitoring).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from shared.contracts import ENCLOSED_MESSAGE_TYPES, parse_enclosed_types
from shared.delivery import Observation, ObservedSettlement, Outcome, Settlement
from shared.telemetry import conventions as c
from shared.telemetry import instruments
from shared.telemetry.propagation import context_from_properties, joined

tracer = trace.get_tracer(c.INSTRUMENTATION_SCOPE)


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


_DISPOSITIONS: Final = {
    Outcome.HANDLED: c.COMPLETE,
    Outcome.RETRIED: c.ABANDON,
    Outcome.DEAD_LETTERED: c.DEAD_LETTER,
}
"""``messaging.servicebus.disposition_status`` of each settled outcome (the conventions' values)."""

Observer = Callable[[Observation], None]
"""Called with a delivery's observation when it ends (inside the span, before it ends)."""


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
    observers: Iterable[Observer] = (),
) -> Iterator[ObservedSettlement]:
    """The ``process <queue>`` span (a CONSUMER span, the current one inside the block, so handlers'
    outgoing messages carry it on) of one delivery to ``endpoint``, a child of the context the message's
    ``properties`` carry; yields the settlement to settle through. On exit the delivery's observation
    (``failed`` when the block ended before settling) goes on the span, into the processing metrics with the
    endpoint, contract and outcome, and to each of ``observers``."""
    contract = contract_of(properties)
    attributes = delivery_attributes(
        endpoint,
        queue,
        message_id=message_id,
        delivery_count=delivery_count,
        enqueued_time=enqueued_time,
        contract=contract,
    )
    with tracer.start_as_current_span(
        c.span_name(c.PROCESS, queue),
        context=joined(context_from_properties(properties)),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
    ) as span:
        observed = ObservedSettlement(actions, enqueued_time)
        try:
            yield observed
        except BaseException as error:
            span.set_attribute(c.ERROR_TYPE, type(error).__qualname__)
            raise
        finally:
            observation = observed.observation()
            _annotate(span, observation)
            _record(endpoint, queue, contract, observation)
            for observer in observers:
                observer(observation)


def _annotate(span: Span, observation: Observation) -> None:
    disposition = _DISPOSITIONS.get(observation.outcome)
    if disposition is not None:
        span.set_attribute(c.DISPOSITION_STATUS, disposition)
    dead = observation.dead_lettering
    if dead is not None:
        span.add_event(
            "dead_lettered",
            {c.DEAD_LETTER_REASON: dead.reason, c.DEAD_LETTER_DESCRIPTION: dead.description},
            timestamp=dead.at_ns,
        )
        span.set_attribute(c.DEAD_LETTER_REASON, dead.reason)
        span.set_status(Status(StatusCode.ERROR, dead.reason or None))
    span.set_attribute(c.OUTCOME, observation.outcome.value)


def _record(endpoint: str, queue: str, contract: str, observation: Observation) -> None:
    labels = {c.ENDPOINT: endpoint, c.CONTRACT: contract, c.DESTINATION_NAME: queue}
    outcome = observation.outcome
    instruments.consumed.add(1, labels)
    instruments.process_duration.record(observation.seconds, {**labels, c.OUTCOME: outcome.value})
    if outcome is Outcome.HANDLED:
        instruments.successes.add(1, labels)
        instruments.processing_time.record(observation.seconds, labels)
        if observation.critical_seconds is not None:
            instruments.critical_time.record(observation.critical_seconds, labels)
    else:
        instruments.failures.add(1, {**labels, c.OUTCOME: outcome.value})
    if outcome is Outcome.DEAD_LETTERED:
        instruments.dead_lettered.add(1, labels)
