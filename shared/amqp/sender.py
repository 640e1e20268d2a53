"""Sending messages to a queue or topic over AMQP with python-qpid-proton's public API: the copies Busbar
makes of received messages, every application property with its AMQP type (:mod:`shared.amqp.outgoing`).

As azure-servicebus sends (``_servicebus_sender.py``, ``_pyamqp/sender.py``): a token for the entity on
``$cbs`` (:meth:`~shared.amqp.connection.Namespace.connect`, renewed before it expires on a kept sender), a
send link to the entity, each message one unsettled transfer whose outcome is awaited:

* ``accepted``: sent;
* ``rejected``: refused with the broker's error, raised as :class:`SendRefused` naming its condition and
  description (``amqp:resource-limit-exceeded`` for a full entity, ``amqp:link:message-size-exceeded``,
  ``com.microsoft:entity-disabled``, ...); ``released`` or ``modified`` likewise (not taken);
* no outcome before the wait ends, or the link or connection lost first: :class:`SendOutcomeUnknown` (the
  broker may have taken it: a caller that keeps the original keeps a possible duplicate, never a loss).

A link Service Bus refuses to attach (an entity that does not exist, one disabled for send) raises
:class:`SendRefused` when the sender opens. A message larger than the link's ``max-message-size`` (the
broker's attach; 1 MiB when it gives none, as the SDK's ``MAX_MESSAGE_LENGTH_BYTES``) is refused before
anything is sent with :class:`MessageTooLarge`, as the SDK refuses one with ``MessageSizeExceededError``.

:meth:`EntitySender.send_all` sends several over the one link and awaits their outcomes together; each
message has its own outcome (:class:`SendOutcome`), so a caller knows exactly which were taken.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import proton
from proton.utils import BlockingConnection, LinkDetached

from shared.amqp.connection import Namespace, WireError
from shared.amqp.outgoing import OutgoingMessage

log = logging.getLogger(__name__)

SEND_TIMEOUT = 60.0
"""How long a send waits for the broker's outcomes (the SDK's default operation timeout is 60 s too)."""
DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024
"""The SDK's ``MAX_MESSAGE_LENGTH_BYTES``: the limit when the broker's attach names none."""
RENEW_BEFORE_SECONDS = 300.0
"""A kept sender puts a fresh token this long before the last one expires."""


class SendRefused(WireError):
    """Service Bus refused a message or the send link: ``condition`` and ``description`` are its own."""

    def __init__(self, what: str, condition: str | None, description: str | None) -> None:
        super().__init__(
            f"{what} refused by Service Bus: {condition or 'no condition'}: {description or ''}", condition
        )
        self.description = description


class SendOutcomeUnknown(WireError):
    """No outcome came for a sent message: the broker may or may not have taken it."""


class MessageTooLarge(WireError, ValueError):
    """A message larger than the link's maximum message size; it was not sent."""

    def __init__(self, entity: str, size: int, limit: int) -> None:
        super().__init__(
            f"the message ({size} bytes encoded) is larger than {entity}'s maximum message size "
            f"({limit} bytes): not sent",
            "amqp:link:message-size-exceeded",
        )
        self.size = size
        self.limit = limit


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """What became of one message of :meth:`EntitySender.send_all`: ``error`` is None when it was taken."""

    message: OutgoingMessage
    error: WireError | None = None

    @property
    def sent(self) -> bool:
        """The broker accepted the message."""
        return self.error is None


class EntitySender:
    """A sender to one queue or topic (``entity_path``). A context manager; not thread-safe. Raises
    :class:`SendRefused` when Service Bus refuses the token or the link, naming its reason."""

    def __init__(self, namespace: Namespace, entity_path: str) -> None:
        self.namespace = namespace
        self.entity_path = entity_path
        try:
            self._connection: BlockingConnection
            self._connection, self._token_expiry = namespace.connect_until(entity_path)
        except WireError as error:  # Azure refuses the token for an entity that does not exist (404)
            raise SendRefused(f"the token for {entity_path}", error.condition, str(error)) from None
        self.broken = False
        """True once the link or the connection was lost: a kept sender is replaced then."""
        try:
            self._blocking: Any = self._connection.create_sender(entity_path, name=f"busbar-{uuid.uuid4()}")
        except LinkDetached as error:
            self._connection.close()
            raise _link_refused(entity_path, error.link) from None
        except BaseException:
            self._connection.close()
            raise

    def __enter__(self) -> EntitySender:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    @property
    def stale(self) -> bool:
        """The link or the connection was lost, or the token expired unrenewed (a sender kept idle past
        it: Service Bus closes what an expired token authorised). A kept sender is replaced then."""
        return self.broken or time.time() >= self._token_expiry

    @property
    def max_message_size(self) -> int:
        """The largest encoded message the link takes (the broker's attach)."""
        return int(self._blocking.link.remote_max_message_size or DEFAULT_MAX_MESSAGE_SIZE)

    def check_size(self, message: OutgoingMessage) -> bytes:
        """``message`` encoded; raises :class:`MessageTooLarge` when the link would not take it."""
        encoded = message.encoded()
        if len(encoded) > self.max_message_size:
            raise MessageTooLarge(self.entity_path, len(encoded), self.max_message_size)
        return encoded

    def send(self, message: OutgoingMessage) -> None:
        """Send one message; raises the :class:`~shared.amqp.connection.WireError` that says why it was not
        taken (:class:`MessageTooLarge`, :class:`SendRefused`, :class:`SendOutcomeUnknown`)."""
        (outcome,) = self.send_all([message])
        if outcome.error is not None:
            raise outcome.error

    def send_all(self, messages: Sequence[OutgoingMessage]) -> list[SendOutcome]:
        """Send ``messages`` in order over the one link and await their outcomes together: one
        :class:`SendOutcome` each, in order. A message too large is not sent (the others are)."""
        self._renew_token()
        link = self._blocking.link
        errors: dict[int, WireError] = {}
        deliveries: dict[int, proton.Delivery] = {}
        for index, message in enumerate(messages):
            try:
                encoded = self.check_size(message)
            except MessageTooLarge as error:
                errors[index] = error
                continue
            deliveries[index] = link.delivery(link.delivery_tag())
            link.stream(encoded)
            link.advance()
        self._await(deliveries.values())
        for index, delivery in deliveries.items():
            refusal = self._judge(delivery)
            if refusal is not None:
                errors[index] = refusal
        return [SendOutcome(message, errors.get(index)) for index, message in enumerate(messages)]

    def _await(self, deliveries: Any) -> None:
        pending = list(deliveries)
        # A wait that ends (timed out, the link or the connection lost) leaves the unanswered unjudged:
        # _judge reports each of them as an unknown outcome.
        try:
            self._connection.wait(
                lambda: all(d.remote_state != 0 or d.settled for d in pending), timeout=SEND_TIMEOUT
            )
        except proton.Timeout:
            pass
        except proton.ProtonException:  # the link or the connection is gone: the sender is of no more use
            self.broken = True

    def _judge(self, delivery: proton.Delivery) -> WireError | None:
        # Read before settling: a delivery settled on both sides is freed by proton.
        answer, condition = delivery.remote_state, delivery.remote.condition
        delivery.settle()
        if answer == proton.Delivery.ACCEPTED:
            return None
        if answer == 0:
            return SendOutcomeUnknown(
                f"no outcome from Service Bus for a message sent to {self.entity_path} (it may be taken)",
                None,
            )
        name = getattr(condition, "name", None)
        description = getattr(condition, "description", None)
        if answer != proton.Delivery.REJECTED:
            description = f"{description or ''} (outcome {answer})".strip()
        return SendRefused(f"a message sent to {self.entity_path}", name, description)

    def _renew_token(self) -> None:
        if time.time() >= self._token_expiry - RENEW_BEFORE_SECONDS:
            self._token_expiry = self.namespace.authorize(self._connection, self.entity_path)

    def close(self) -> None:
        """Close the link and the connection."""
        try:
            self._connection.close()
        except proton.ProtonException:  # lost already (broken, or closed by Service Bus): nothing to close
            log.debug("closing the sender to %s found it closed", self.entity_path, exc_info=True)


def _link_refused(entity_path: str, link: proton.Link) -> SendRefused:
    condition = link.remote_condition
    return SendRefused(
        f"the send link to {entity_path}",
        getattr(condition, "name", None),
        getattr(condition, "description", None),
    )


__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "EntitySender",
    "MessageTooLarge",
    "SendOutcome",
    "SendOutcomeUnknown",
    "SendRefused",
]
