"""How a Service Bus function wants its messages, read from its trigger binding and its annotations: one
message or a batch, sessions or not, which payload type (the binding extension's SDK types, ``func``
messages, ``str`` or ``bytes``), and whether it settles itself through ``ServiceBusMessageActions``.

The worker reads this when it indexes the app; the host gets the plain part (``ServiceBusShape``), the
annotation classes the converters need stay here."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azurefunctions.extensions.base import SdkType, get_binding_registry

from devhost.worker.app_loader import FunctionSpec
from devhost.worker_protocol import PayloadKind, ServiceBusShape


@dataclass(frozen=True, slots=True)
class TriggerShape:
    """How a function wants its messages (``service_bus``, for the host) and the classes that bind them."""

    service_bus: ServiceBusShape
    payload_type: Any  # the trigger parameter's annotation: the extension's converter gets it as pytype
    actions_type: Any  # the ``ServiceBusMessageActions`` parameter's annotation, if any


def _hints(spec: FunctionSpec) -> dict[str, Any]:
    try:
        return typing.get_type_hints(spec.handler)
    except Exception:  # unresolvable forward references: fall back to the raw annotations
        return {name: p.annotation for name, p in spec.parameters.items()}


def _payload_kind(annotation: Any) -> PayloadKind:
    inner = (
        typing.get_args(annotation)[0] if typing.get_origin(annotation) in (list, Sequence) else annotation
    )
    name = inner if isinstance(inner, str) else getattr(inner, "__name__", "")
    if inner is str:
        return "str"
    if inner is bytes:
        return "bytes"
    if isinstance(inner, type) and issubclass(inner, SdkType):
        return "sdk"
    if inner is ServiceBusReceivedMessage or str(name).endswith("ServiceBusReceivedMessage"):
        raise ValueError(
            "annotate the trigger with"
            " azurefunctions.extensions.bindings.servicebus.ServiceBusReceivedMessage:"
            " the worker binds azure.servicebus.ServiceBusReceivedMessage as no Service Bus type"
        )
    return "func"


def is_actions_annotation(annotation: Any) -> bool:
    """Whether a parameter asks for a gRPC client type (the extension's ``ServiceBusMessageActions``),
    the test the worker applies (``check_supported_grpc_client_type``)."""
    return bool(get_binding_registry().check_supported_grpc_client_type(annotation))


def trigger_shape(spec: FunctionSpec) -> TriggerShape:
    """Read the trigger binding and the handler's annotations."""
    binding = spec.trigger
    queue = binding.get("queueName")
    topic = binding.get("topicName")
    subscription = binding.get("subscriptionName")
    if not queue and not (topic and subscription):
        raise ValueError(
            f"function '{spec.name}': a Service Bus trigger needs queueName or topicName+subscriptionName"
        )
    hints = _hints(spec)
    actions_arg = next((name for name, hint in hints.items() if is_actions_annotation(hint)), None)
    try:
        payload = _payload_kind(hints.get(spec.trigger_arg))
    except ValueError as exc:
        raise ValueError(f"function '{spec.name}': {exc}") from None
    auto_complete = binding.get("autoCompleteMessages")
    shape = ServiceBusShape(
        entity=str(queue) if queue else f"{topic}/Subscriptions/{subscription}",
        queue_name=str(queue) if queue else None,
        topic_name=None if queue else str(topic),
        subscription_name=None if queue else str(subscription),
        sessions=bool(binding.get("isSessionsEnabled")),
        batch=str(binding.get("cardinality", "ONE")).upper() == "MANY",
        auto_complete=None if auto_complete is None else bool(auto_complete),
        payload=payload,
        actions_arg=actions_arg,
    )
    return TriggerShape(
        service_bus=shape,
        payload_type=hints.get(spec.trigger_arg),
        actions_type=hints.get(actions_arg) if actions_arg is not None else None,
    )
