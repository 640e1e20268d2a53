"""Sending a message with qpid-proton, an AMQP client that writes every AMQP type: a .NET sender's ``char``
and ``decimal`` application properties, which azure-servicebus can neither write nor read
(tests/devhost/servicebus/test_sdk_cannot_read_dotnet_properties.py), and devhost's listeners receive
through Busbar's seam (shared.amqp) as a .NET host reads them."""

from __future__ import annotations

from typing import Any

import proton
from proton.utils import BlockingConnection

from tests.journeys.amqp_reader import _put_token, _settings


def send_typed(connection_string: str, queue: str, *messages: proton.Message) -> None:
    """Send ``messages`` to ``queue`` as they are, AMQP types included."""
    settings = _settings(connection_string)
    host = settings["endpoint"].removeprefix("sb://").rstrip("/")
    connection = BlockingConnection(
        f"amqp://{host}", allowed_mechs="ANONYMOUS", sasl_enabled=True, timeout=30
    )
    try:
        _put_token(connection, f"sb://{host}/{queue}", settings)
        sender = connection.create_sender(queue)
        for message in messages:
            sender.send(message)
    finally:
        connection.close()


def dotnet_message(body: str, message_id: str, **properties: Any) -> proton.Message:
    """A message as a .NET sender writes it: a data body and the given application properties."""
    return proton.Message(body=body.encode(), id=message_id, properties=properties, inferred=True)
