"""Sending messages with every AMQP type, a char included, as a .NET sender puts them on the wire: through
Busbar's own AMQP sender (:mod:`shared.amqp.sender`; azure-servicebus cannot send a char)."""

from __future__ import annotations

from shared.amqp.connection import Namespace
from shared.amqp.outgoing import OutgoingMessage
from shared.amqp.sender import EntitySender


def send_typed(connection_string: str, entity: str, *messages: OutgoingMessage) -> None:
    """Send ``messages`` to the queue or topic ``entity``; raises the first refusal."""
    with EntitySender(Namespace.from_connection_string(connection_string), entity) as sender:
        for outcome in sender.send_all(messages):
            if outcome.error is not None:
                raise outcome.error
