"""Receiving messages with qpid-proton, an AMQP client that keeps every AMQP type, to read what a message
carries on the wire: the journey tests' independent witness (azure-servicebus decodes every integer type to
``int``, so it cannot say whether a property arrived as a ushort or a long).

It authenticates as any Service Bus client does: SASL ANONYMOUS, then a SAS token put on ``$cbs``."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import proton
from azure.servicebus._pyamqp.utils import generate_sas_token
from proton.utils import BlockingConnection

from tests.shared.envelope.wire_types import wire_type


@dataclass(frozen=True, slots=True)
class WireMessage:
    """One received message: its system properties, body and application properties (proton's typed
    values, so :func:`~tests.shared.envelope.wire_types.wire_type` names each one's AMQP type)."""

    message_id: Any
    correlation_id: Any
    subject: str | None
    content_type: str | None
    body: Any
    properties: dict[str, Any]

    def types(self) -> dict[str, str]:
        """The AMQP type of every application property."""
        return {name: wire_type(value) for name, value in self.properties.items()}


def _settings(connection_string: str) -> dict[str, str]:
    parts = (part.split("=", 1) for part in connection_string.split(";") if "=" in part)
    return {key.lower(): value for key, value in parts}


def receive_all(connection_string: str, address: str, idle_seconds: float = 3.0) -> list[WireMessage]:
    """Every message ``address`` (a queue, ``<queue>/$deadletterqueue``, ...) holds, received and completed,
    waiting ``idle_seconds`` after the last one for more."""
    settings = _settings(connection_string)
    host = settings["endpoint"].removeprefix("sb://").rstrip("/")
    connection = BlockingConnection(
        f"amqp://{host}", allowed_mechs="ANONYMOUS", sasl_enabled=True, timeout=30
    )
    try:
        _put_token(connection, f"sb://{host}/{address.split('/$')[0]}", settings)
        receiver = connection.create_receiver(address, credit=50)
        messages: list[WireMessage] = []
        while True:
            try:
                message = receiver.receive(timeout=idle_seconds)
            except proton.Timeout:
                return messages
            messages.append(_wire(message))
            receiver.accept()
    finally:
        connection.close()


def _put_token(connection: BlockingConnection, audience: str, settings: dict[str, str]) -> None:
    token = generate_sas_token(  # type: ignore[no-untyped-call]
        audience, settings["sharedaccesskeyname"], settings["sharedaccesskey"], int(time.time()) + 3600
    )
    sender = connection.create_sender("$cbs")
    replies = connection.create_receiver("$cbs", credit=1)
    request = proton.Message(
        body=token,
        id=str(uuid.uuid4()),
        reply_to="$cbs",
        properties={
            "operation": "put-token",
            "type": "servicebus.windows.net:sastoken",
            "name": audience,
            "expiration": proton.timestamp((time.time() + 3600) * 1000),
        },
    )
    sender.send(request)
    reply = replies.receive(timeout=30)  # sent settled: nothing to accept
    reply_properties: dict[Any, Any] = dict(reply.properties or {})
    status = reply_properties.get("status-code")
    assert status in (200, 202), f"put-token for {audience} refused: {reply.properties}"


def _wire(message: proton.Message) -> WireMessage:
    # proton hands binaries out as views of a buffer it reuses: copied now, they stay binary (bytes).
    return WireMessage(
        message_id=message.id,
        correlation_id=message.correlation_id,
        subject=message.subject,
        content_type=None if message.content_type is None else str(message.content_type),
        body=_owned(message.body),
        properties={str(name): _owned(value) for name, value in _properties(message).items()},
    )


def _properties(message: proton.Message) -> dict[Any, Any]:
    return dict(message.properties or {})


def _owned(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value
