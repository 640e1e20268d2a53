"""The trace a dead-lettered message belongs to, as the console shows it beside its headers: read from its
``traceparent`` (Busbar's stamp) or ``Diagnostic-Id`` (azure-servicebus's and the .NET senders' stamp)."""

from __future__ import annotations

import pytest

from shared.telemetry.propagation import trace_of

pytestmark = pytest.mark.timeout(10)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def test_the_trace_id_comes_from_traceparent_first() -> None:
    properties = {
        "traceparent": f"00-{TRACE}-{SPAN}-01",
        "Diagnostic-Id": f"00-{'1' * 32}-{SPAN}-01",
    }
    assert trace_of(properties) == {"traceId": TRACE, "spanId": SPAN, "property": "traceparent"}


def test_a_diagnostic_id_in_w3c_form_gives_the_trace_id_and_bytes_are_read_as_text() -> None:
    assert trace_of({"Diagnostic-Id": f"00-{TRACE.upper()}-{SPAN}-00".encode()}) == {
        "traceId": TRACE,
        "spanId": SPAN,
        "property": "Diagnostic-Id",
    }


def test_a_hierarchical_diagnostic_id_gives_its_root_id() -> None:
    found = trace_of({"Diagnostic-Id": "|a1b2c3.4d5e6f_1."})
    assert found == {"rootId": "a1b2c3", "property": "Diagnostic-Id"}


@pytest.mark.parametrize(
    "value",
    [
        "",
        "not a traceparent",
        f"00-{'0' * 32}-{SPAN}-01",  # an all-zero trace id is invalid (W3C Trace Context, 3.2.2.3)
        f"00-{TRACE}-{'0' * 16}-01",
        f"ff-{TRACE}-{SPAN}-01",  # version ff is invalid
        f"00-{TRACE[:-1]}-{SPAN}-01",
        42,
    ],
)
def test_an_invalid_or_missing_trace_context_gives_none(value: object) -> None:
    assert trace_of({"traceparent": value}) is None
    assert trace_of({}) is None
