"""Spans of the messages Busbar sends: publishes and sends that carry the current trace on, and the
operations that act on a message *again* (re-drive, console retry, replay, the router's bridge), which start
a new trace *linked* to the message's original one.

Why linked and not continued: the cause of a re-drive or a retry is an operator or a timer, possibly days
after the publish; making it a child would stretch the original trace over that time and hide the new
cause. A link keeps both navigable: the original trace → the re-drive's trace → the copy's processing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from azure.servicebus import ServiceBusMessage
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import AttributeValue

from shared.telemetry import conventions as c
from shared.telemetry import instruments
from shared.telemetry.processing import contract_of
from shared.telemetry.propagation import current_trace_properties, joined, link_to, replace_trace_properties

tracer = trace.get_tracer(c.INSTRUMENTATION_SCOPE)

PUBLISH = "publish"
SEND = "send"


@contextmanager
def continuing(context: Context) -> Iterator[None]:
    """Make ``context`` (e.g. an HTTP request's ``traceparent``) the current one inside the block, unless
    the current one already continues it (:func:`~shared.telemetry.propagation.joined`: the host's span)."""
    parent = joined(context)
    if parent is None:
        yield
        return
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


def trace_stamped(properties: Mapping[str, Any]) -> dict[str, Any]:
    """``properties`` with the current span's trace context (replacing any they carried), for a message
    Busbar sends itself (:mod:`shared.amqp.outgoing`); unchanged when there is no span to continue."""
    result: dict[Any, Any] = dict(properties)
    stamped = current_trace_properties()
    replace_trace_properties(result, stamped)
    for name in list(result):
        if isinstance(name, bytes):  # current_trace_properties names them as azure-servicebus writes them
            result[name.decode()] = result.pop(name)
    return result


def stamp_message(message: ServiceBusMessage) -> None:
    """Put the current span's trace context on ``message`` (replacing any it carried); nothing changes
    when there is no span to continue (tracing off and no incoming context)."""
    stamped = current_trace_properties()
    if not stamped:
        return
    properties: dict[str | bytes, Any] = dict(message.application_properties or {})
    replace_trace_properties(properties, stamped)
    message.application_properties = properties


@contextmanager
def producing(
    destination: str, messages: Sequence[ServiceBusMessage], *, operation: str = PUBLISH
) -> Iterator[Span]:
    """The ``publish <topic>`` / ``send <queue>`` span (PRODUCER, a child of the current context) around
    sending ``messages``, each stamped with it; ``messaging.client.sent.messages`` counts them once the block
    returns (a send that raises sent nothing)."""
    with tracer.start_as_current_span(c.span_name(operation, destination), kind=SpanKind.PRODUCER) as span:
        if span.is_recording():  # reading a ServiceBusMessage's properties is not free: only when kept
            span.set_attributes(_send_attributes(destination, messages, operation))
        for message in messages:
            stamp_message(message)
        yield span
    instruments.count(
        instruments.sent,
        len(messages),
        {c.DESTINATION_NAME: destination, c.OPERATION_NAME: operation},
    )


def _send_attributes(
    destination: str, messages: Sequence[ServiceBusMessage], operation: str
) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        c.MESSAGING_SYSTEM: c.SERVICEBUS,
        c.OPERATION_NAME: operation,
        c.OPERATION_TYPE: c.SEND,
        c.DESTINATION_NAME: destination,
    }
    if len(messages) == 1:
        only = messages[0]
        if only.message_id is not None:
            attributes[c.MESSAGE_ID] = str(only.message_id)
        attributes[c.CONTRACT] = contract_of(only.application_properties)
    else:
        attributes[c.BATCH_COUNT] = len(messages)
    return attributes


@contextmanager
def linked(
    operation: str,
    original: Mapping[Any, Any] | None,
    *,
    destination: str = "",
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[Span]:
    """A span starting a new trace, *linked* to the trace the original message's application properties
    carry (``original``); current inside the block, so a copy stamped there (:func:`stamp_message`) is
    processed in the new trace. ``operation``: ``redrive``, ``retry``, ``replay``, ``bridge``."""
    span_attributes: dict[str, AttributeValue] = {
        c.MESSAGING_SYSTEM: c.SERVICEBUS,
        c.OPERATION_NAME: operation,
        c.OPERATION_TYPE: c.SEND,
        c.DESTINATION_NAME: destination,
        c.CONTRACT: contract_of(original),
        **(attributes or {}),
    }
    with tracer.start_as_current_span(
        c.span_name(operation, destination),
        context=Context(),
        kind=SpanKind.PRODUCER,
        links=link_to(original),
        attributes=span_attributes,
    ) as span:
        yield span


def record_archived(
    span: Span | None, reason: str, count: int = 1, attributes: Mapping[str, str] | None = None
) -> None:
    """An archiving of ``count`` messages for ``reason``: ``busbar.messages.archived``, and the reason on
    ``span`` (the current one when None; nothing when there is none) as an ``archived`` event."""
    target = span or trace.get_current_span()
    target.add_event("archived", {c.ARCHIVE_REASON: reason})
    instruments.count(instruments.archived, count, {c.ARCHIVE_REASON: reason, **(attributes or {})})
