"""Trigger and HTTP types -> Busbar's own types, and Busbar's API responses -> ``func.HttpResponse``.

The only place (with the function modules) that knows ``azure.functions``: ``shared/`` works on
:class:`~shared.messages.IncomingMessage` and :class:`~shared.api.ApiResponse`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import azure.functions as func
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.amqp import AmqpMessageBodyType

from shared.api import ApiRequest, ApiResponse
from shared.messages import IncomingMessage, as_text


def _properties(raw: Mapping[Any, Any] | None) -> dict[str, Any]:
    # The SDK may hand keys (and string values) over as bytes; Busbar's headers are text.
    out: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        out[as_text(key) or ""] = (
            value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value
        )
    return out


def _seconds(value: timedelta | float | None) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _body(message: ServiceBusReceivedMessage) -> bytes:
    # Busbar and NServiceBus send data bodies; another client may send an AMQP value or sequence body, which
    # must still reach dispatch (and be dead-lettered there with a precise reason) instead of failing here.
    if message.body_type == AmqpMessageBodyType.DATA:
        return b"".join(message.body)
    value: Any = message.body
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(_jsonable(value), default=str).encode("utf-8")


def _jsonable(value: Any) -> Any:
    # AMQP maps and lists decode with bytes keys and strings.
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Mapping):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def incoming_from_received(message: ServiceBusReceivedMessage) -> IncomingMessage:
    """An SDK-type binding's message as an :class:`IncomingMessage`."""
    return IncomingMessage(
        body=_body(message),
        message_id=as_text(message.message_id),
        content_type=as_text(message.content_type),
        correlation_id=as_text(message.correlation_id),
        session_id=as_text(message.session_id),
        subject=as_text(message.subject),
        reply_to=as_text(message.reply_to),
        reply_to_session_id=as_text(message.reply_to_session_id),
        to=as_text(message.to),
        partition_key=as_text(message.partition_key),
        time_to_live_seconds=_seconds(message.time_to_live),
        application_properties=_properties(message.application_properties),
        delivery_count=message.delivery_count,
        sequence_number=message.sequence_number,
        enqueued_time=message.enqueued_time_utc,
        dead_letter_source=as_text(message.dead_letter_source),
    )


def api_request(request: func.HttpRequest) -> ApiRequest:
    """An HTTP request as Busbar's :class:`ApiRequest` (body kept raw: the service validates it)."""
    return ApiRequest(
        method=request.method.upper(),
        route_params=dict(request.route_params),
        query=dict(request.params),
        body=request.get_body() or b"",
    )


def http_response(response: ApiResponse) -> func.HttpResponse:
    """Busbar's :class:`ApiResponse` as a JSON ``func.HttpResponse``."""
    return func.HttpResponse(
        body=json.dumps(response.body, indent=2, default=str),
        status_code=response.status,
        headers=dict(response.headers),
        mimetype="application/json",
        charset="utf-8",
    )
