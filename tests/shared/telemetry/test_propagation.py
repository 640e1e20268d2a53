"""W3C trace context in application properties and HTTP headers (shared.telemetry.propagation), read and
written as azure-servicebus does (``azure/servicebus/_common/tracing.py``: ``traceparent`` first, then
``Diagnostic-Id``; ``bytes`` keys on what it writes and on what a receiver gets)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from shared.telemetry.operations import continuing
from shared.telemetry.propagation import (
    carrier_from_properties,
    context_from_headers,
    context_from_properties,
    current_trace_properties,
    joined,
    link_to,
    span_context_of,
    stamp,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
PARENT = f"00-{TRACE}-{SPAN}-01"


def _ids(context: object) -> tuple[str, str]:
    span_context = trace.get_current_span(context).get_span_context()  # type: ignore[arg-type]
    return format(span_context.trace_id, "032x"), format(span_context.span_id, "016x")


def test_a_received_messages_traceparent_under_a_bytes_key_is_its_context() -> None:
    assert _ids(context_from_properties({b"traceparent": PARENT.encode()})) == (TRACE, SPAN)


def test_diagnostic_id_alone_is_read_as_the_context_as_azure_servicebus_does() -> None:
    # A message from the .NET SDK or an older azure-servicebus carries only Diagnostic-Id.
    assert _ids(context_from_properties({"Diagnostic-Id": PARENT})) == (TRACE, SPAN)


def test_traceparent_wins_over_diagnostic_id() -> None:
    other = f"00-{'1' * 32}-{'2' * 16}-01"
    carrier = carrier_from_properties({b"Diagnostic-Id": other.encode(), b"traceparent": PARENT.encode()})
    assert carrier == {"traceparent": PARENT}


def test_tracestate_travels_with_the_traceparent() -> None:
    carrier = carrier_from_properties({"traceparent": PARENT, "tracestate": "vendor=1"})
    assert carrier == {"traceparent": PARENT, "tracestate": "vendor=1"}


def test_a_message_without_trace_context_or_with_a_malformed_one_has_none() -> None:
    assert span_context_of({}) is None
    assert span_context_of(None) is None
    assert span_context_of({"traceparent": "not-a-traceparent"}) is None
    assert link_to({"NServiceBus.MessageId": "m-1"}) == []


def test_http_headers_in_any_case_give_the_callers_context() -> None:
    assert _ids(context_from_headers({"TraceParent": PARENT})) == (TRACE, SPAN)
    assert not trace.get_current_span(context_from_headers({})).get_span_context().is_valid


def test_a_link_points_at_the_original_trace() -> None:
    (link,) = link_to({b"traceparent": PARENT.encode()})
    assert (format(link.context.trace_id, "032x"), format(link.context.span_id, "016x")) == (TRACE, SPAN)


def test_the_current_context_is_written_as_traceparent_and_diagnostic_id_under_bytes_keys() -> None:
    # Without an SDK the API still carries a context it was given: a traceparent passes through.
    with continuing(context_from_headers({"traceparent": PARENT})):
        assert current_trace_properties() == {b"traceparent": PARENT, b"Diagnostic-Id": PARENT}


def test_nothing_is_written_when_there_is_no_trace_to_continue() -> None:
    assert current_trace_properties() == {}
    properties = {"NServiceBus.MessageId": "m-1"}
    stamp(properties)
    assert properties == {"NServiceBus.MessageId": "m-1"}


def test_stamping_replaces_the_context_a_copy_carried_under_either_key_type() -> None:
    new = SpanContext(int("a" * 32, 16), int("b" * 16, 16), is_remote=False, trace_flags=TraceFlags(1))
    properties: dict[str | bytes, object] = {
        "traceparent": PARENT,
        b"Diagnostic-Id": PARENT.encode(),
        "tracestate": "old=1",
        "NServiceBus.MessageId": "m-1",
    }
    stamp(properties, trace.set_span_in_context(NonRecordingSpan(new)))
    expected = f"00-{'a' * 32}-{'b' * 16}-01"
    assert properties == {
        "NServiceBus.MessageId": "m-1",
        b"traceparent": expected,
        b"Diagnostic-Id": expected,
    }


def test_a_current_span_of_the_same_trace_stays_the_parent_and_one_of_another_trace_does_not() -> None:
    # In Azure, with PYTHON_ENABLE_OPENTELEMETRY, the worker attaches the host's invocation span: Busbar's
    # span belongs under it when it continues the message's trace.
    message = context_from_properties({b"traceparent": PARENT.encode()})
    same = SpanContext(int(TRACE, 16), int("c" * 16, 16), is_remote=True, trace_flags=TraceFlags(1))
    other = SpanContext(int("d" * 32, 16), int("c" * 16, 16), is_remote=True, trace_flags=TraceFlags(1))
    with continuing(trace.set_span_in_context(NonRecordingSpan(same))):
        assert joined(message) is None
    with continuing(trace.set_span_in_context(NonRecordingSpan(other))):
        assert joined(message) is message
    assert joined(message) is message  # nothing current
