"""W3C trace context carried by a message's application properties and by HTTP headers.

azure-servicebus writes the context of its ``ServiceBus.message`` span into the application properties
``Diagnostic-Id`` and ``traceparent`` (and ``tracestate``), and reads ``traceparent`` first, then
``Diagnostic-Id``, when it links a received message (``azure/servicebus/_common/tracing.py``:
``trace_message``, ``get_span_link_from_message``); the .NET SDK and NServiceBus write ``Diagnostic-Id``
(and NServiceBus ``traceparent``) in W3C format too. Busbar reads and writes the same properties, so a
message from any of them joins the same trace, and writes them under ``bytes`` keys as azure-servicebus
does: the SDK only ``setdefault``s its own, so when its tracing is on too the message still carries one
context, never two properties of the same name. The console reads the same property the same way to show
the trace a dead-lettered message belongs to (:func:`trace_of`), so there is one reader of a message's trace
context.

Pure: the OpenTelemetry API's W3C propagator, no SDK; with no SDK installed the API still carries a context
it was given (a non-recording span), so a ``traceparent`` passes through even with tracing off.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT: Final = "traceparent"
TRACESTATE: Final = "tracestate"
DIAGNOSTIC_ID: Final = "Diagnostic-Id"
TRACE_PROPERTIES: Final = (TRACEPARENT, TRACESTATE, DIAGNOSTIC_ID)

_W3C = TraceContextTextMapPropagator()


def _text(value: object) -> str | None:
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("ascii")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def _named(properties: Mapping[Any, Any], name: str) -> str | None:
    """The property ``name`` as text, whether its key arrived as ``str`` or ``bytes`` (the SDK's)."""
    for key in (name, name.encode()):
        if key in properties:
            return _text(properties[key])
    return None


def _trace_property(properties: Mapping[Any, Any] | None) -> tuple[str, str] | None:
    """The property that carries the message's trace context, and its text (stripped): ``traceparent`` when
    it is there and not empty, else ``Diagnostic-Id``. That is azure-servicebus's order
    (``get_span_link_from_message``): the first one present is the one read, valid or not."""
    if not properties:
        return None
    for name in (TRACEPARENT, DIAGNOSTIC_ID):
        text = (_named(properties, name) or "").strip()
        if text:
            return name, text
    return None


def carrier_from_properties(properties: Mapping[Any, Any] | None) -> dict[str, str]:
    """The W3C carrier (``traceparent``, ``tracestate``) of a message's application properties:
    ``traceparent``, else ``Diagnostic-Id`` (azure-servicebus's order); empty when neither is there. The hex
    digits are read in either case (a .NET sender's ``Diagnostic-Id`` may be upper case): the W3C format
    writes them in lower case, and a reader loses nothing by being lenient."""
    found = _trace_property(properties)
    if found is None:
        return {}
    carrier = {TRACEPARENT: found[1].lower()}
    state = _named(properties or {}, TRACESTATE)
    if state:
        carrier[TRACESTATE] = state
    return carrier


def context_from_carrier(carrier: Mapping[str, str]) -> Context:
    """The context a W3C carrier names; an empty context when it names none (or a malformed one: the W3C
    rules say to ignore it and start a new trace)."""
    return _W3C.extract(carrier, context=Context())


def context_from_properties(properties: Mapping[Any, Any] | None) -> Context:
    """The trace context a received message carries (see :func:`carrier_from_properties`)."""
    return context_from_carrier(carrier_from_properties(properties))


def context_from_headers(headers: Mapping[str, str]) -> Context:
    """The trace context of an HTTP request's ``traceparent``/``tracestate`` headers (names in any case)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    carrier: dict[str, str] = {n: lowered[n] for n in (TRACEPARENT, TRACESTATE) if n in lowered}
    return context_from_carrier(carrier)


def span_context_of(properties: Mapping[Any, Any] | None) -> SpanContext | None:
    """The span context a message carries, or None (none, or not valid)."""
    span_context = trace.get_current_span(context_from_properties(properties)).get_span_context()
    return span_context if span_context.is_valid else None


def link_to(properties: Mapping[Any, Any] | None) -> list[Link]:
    """A link to the trace a message carries (empty when it carries none): what a span that acts on the
    message *again* (re-drive, retry, bridge, replay) records instead of becoming part of that trace."""
    span_context = span_context_of(properties)
    return [] if span_context is None else [Link(span_context)]


def trace_of(properties: Mapping[Any, Any] | None) -> dict[str, str] | None:
    """The trace a message belongs to, as the console shows it beside its headers (so that a failure leads
    to its trace in Application Insights, or wherever the app's OpenTelemetry exports):
    ``{"traceId", "spanId", "property"}`` when the property that carries its context (see
    :func:`carrier_from_properties`) holds a valid ``traceparent`` (``spanId``: the sending span's), or
    ``{"rootId", "property"}`` from a ``Diagnostic-Id`` in the old hierarchical ``Request-Id`` format
    (``|<root>.<parts>.``, still written by older .NET senders), whose root id is the nearest thing to a
    trace id; None when the message carries neither."""
    found = _trace_property(properties)
    if found is None:
        return None
    name, text = found
    span_context = span_context_of(properties)
    if span_context is not None:
        trace_id, span_id = format(span_context.trace_id, "032x"), format(span_context.span_id, "016x")
        return {"traceId": trace_id, "spanId": span_id, "property": name}
    if name == DIAGNOSTIC_ID and text.startswith("|") and "." in text:
        return {"rootId": text[1:].split(".", 1)[0], "property": name}
    return None


def current_trace_properties(context: Context | None = None) -> dict[bytes, str]:
    """The application properties that carry ``context``'s span (the current one by default):
    ``traceparent`` and ``Diagnostic-Id`` alike (``tracestate`` when there is one), under ``bytes`` keys as
    azure-servicebus writes them; empty when there is no valid span (nothing to continue)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=context)
    parent = carrier.get(TRACEPARENT)
    if not parent:
        return {}
    properties = {TRACEPARENT.encode(): parent, DIAGNOSTIC_ID.encode(): parent}
    if carrier.get(TRACESTATE):
        properties[TRACESTATE.encode()] = carrier[TRACESTATE]
    return properties


def stamp(properties: MutableMapping[Any, Any], context: Context | None = None) -> None:
    """Replace whatever trace context ``properties`` carry (under ``str`` or ``bytes`` keys) with
    ``context``'s (the current span's by default); leave them as they are when there is none."""
    replace_trace_properties(properties, current_trace_properties(context))


def replace_trace_properties(properties: MutableMapping[Any, Any], stamped: Mapping[bytes, str]) -> None:
    """Replace the trace context ``properties`` carry (``str`` or ``bytes`` keys) with ``stamped`` (what
    :func:`current_trace_properties` gave); nothing when ``stamped`` is empty."""
    if not stamped:
        return
    for name in TRACE_PROPERTIES:
        properties.pop(name, None)
        properties.pop(name.encode(), None)
    properties.update(stamped)


def joined(context: Context) -> Context | None:
    """The parent to continue ``context``'s trace under: the *current* context when it already has a span
    in that trace (or ``context`` has none) — in Azure, with ``PYTHON_ENABLE_OPENTELEMETRY``, the worker
    attaches the host's invocation span, itself in the message's or the request's trace, and Busbar's span
    belongs under it — else ``context`` itself. None means "the current context"."""
    current = trace.get_current_span().get_span_context()
    wanted = trace.get_current_span(context).get_span_context()
    if current.is_valid and (not wanted.is_valid or current.trace_id == wanted.trace_id):
        return None
    return context
