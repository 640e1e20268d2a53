"""The trace a message belongs to, from its W3C trace context: so that a failure shown in the console leads
to its trace (in Application Insights, or wherever the app's OpenTelemetry exports). Pure.

azure-servicebus stamps a sent message's ``Diagnostic-Id`` application property with the W3C
``traceparent`` of the send, and Busbar stamps ``traceparent`` itself; .NET senders (NServiceBus, the .NET
SDK) stamp ``Diagnostic-Id``, which holds a ``traceparent`` value too unless the sender still uses the old
hierarchical ``Request-Id`` format (``|<root>.<parts>.``), whose root id is the nearest thing to a trace id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TRACE_PROPERTIES = ("traceparent", "Diagnostic-Id")
"""Where a message carries its trace context, in the order they are read."""
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value.strip() if isinstance(value, str) else None


def trace_of(properties: Mapping[str, Any]) -> dict[str, str] | None:
    """``{"traceId", "spanId", "property"}`` from the first of :data:`TRACE_PROPERTIES` that holds a valid
    ``traceparent`` (``spanId``: the sending span's), or ``{"rootId", "property"}`` from a hierarchical
    ``Diagnostic-Id``; None when the message carries neither."""
    for name in TRACE_PROPERTIES:
        text = _text(properties.get(name))
        if not text:
            continue
        match = _TRACEPARENT.match(text.lower())
        if match is not None:
            version, trace_id, span_id = match.group(1), match.group(2), match.group(3)
            if version != "ff" and trace_id != "0" * 32 and span_id != "0" * 16:
                return {"traceId": trace_id, "spanId": span_id, "property": name}
        elif name == "Diagnostic-Id" and text.startswith("|") and "." in text:
            return {"rootId": text[1:].split(".", 1)[0], "property": name}
    return None
