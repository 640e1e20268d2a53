"""Binding on the worker's side: the plain trigger input the host sends -> the function's arguments, and an
HTTP function's return value -> the response the host sends back (:mod:`devhost.rpc.http_return`).

Service Bus: SDK types through the binding extension's converter, ``func.ServiceBusMessage`` with the
host's trigger metadata, or the body as ``str``/``bytes``; the extension's ``ServiceBusMessageActions``
(a process-wide client that talks gRPC to the host) for the parameter that asks for it. HTTP:
``func.HttpRequest``. Timer: ``TimerRequest``.
"""

from __future__ import annotations

from typing import Any

import azure.functions as func
from azure.functions.servicebus import ServiceBusMessage as WorkerServiceBusMessage
from azure.functions.timer import TimerRequest

from devhost.worker.indexing import WorkerFunction
from devhost.worker.message_conversion import to_function_messages, to_single_function_message
from devhost.worker.sdk_binding import decode_with_extension, trigger_datum
from devhost.worker_protocol import (
    HttpInput,
    InvocationInput,
    ManualServiceBusInput,
    ServiceBusInput,
    ServiceBusMessageData,
    TimerInput,
)


def _service_bus_payload(function: WorkerFunction, data: ServiceBusInput) -> Any:
    name = function.metadata.name
    if data.payload == "sdk":
        return decode_with_extension(
            trigger_datum(data.binding_data, batch=data.batch), function.payload_type
        )
    if data.payload == "func":
        if data.batch:
            return list(to_function_messages(data.messages, name))
        return to_single_function_message(data.messages[0], name)
    values = [_body(message, data.payload) for message in data.messages]
    return values if data.batch else values[0]


def _body(message: ServiceBusMessageData, kind: str) -> str | bytes:
    return message.body.decode("utf-8") if kind == "str" else message.body


def _manual_message(data: ManualServiceBusInput) -> func.ServiceBusMessage:
    """The message a manual run gets: the body, a new id, one delivery (no broker metadata)."""
    return WorkerServiceBusMessage(
        body=data.body,
        message_id=data.message_id,
        application_properties={},
        user_properties={},
        delivery_count=1,
        enqueued_time_utc=data.enqueued_time_utc,
    )


def bind_arguments(function: WorkerFunction, data: InvocationInput) -> dict[str, Any]:
    """The trigger (and Service Bus actions) arguments for one invocation; raises if they cannot be bound."""
    trigger_arg = function.metadata.trigger_arg
    if isinstance(data, ServiceBusInput):
        arguments = {trigger_arg: _service_bus_payload(function, data)}
        shape = function.metadata.service_bus
        if shape is not None and shape.actions_arg is not None:
            # The worker's deferred binding: the extension's process-wide client, talking gRPC to the host.
            arguments[shape.actions_arg] = function.actions_type.get_instance()
        return arguments
    if isinstance(data, ManualServiceBusInput):
        message = _manual_message(data)
        return {trigger_arg: [message] if data.batch else message}
    if isinstance(data, HttpInput):
        request = func.HttpRequest(
            method=data.method,
            url=data.url,
            headers=dict(data.headers),
            params=dict(data.params),
            route_params=dict(data.route_params),
            body=data.body,
        )
        return {trigger_arg: request}
    if isinstance(data, TimerInput):
        timer = TimerRequest(
            past_due=data.past_due, schedule_status=dict(data.schedule_status), schedule=dict(data.schedule)
        )
        return {trigger_arg: timer}
    raise TypeError(f"no binding for {type(data).__name__}")
