"""A receive link's deliveries: kept as they arrive, with the bytes they came as, and settled with an outcome
whose answer Service Bus is awaited for.

The outcomes are what azure-servicebus sends for the same calls (azure-servicebus 7.15,
``_transport/_pyamqp_transport.py`` ``_settle_message_via_receiver_link``; the emulator applies the same:
``emulator/amqp/session.py`` ``_apply_outcome``): complete ``accepted``; abandon ``modified`` with
``delivery-failed``; defer ``modified`` with ``delivery-failed`` and ``undeliverable-here``; dead-letter
``rejected`` with the error ``com.microsoft:dead-letter``, its info ``DeadLetterReason`` and
``DeadLetterErrorDescription``. Each is sent unsettled and its answer awaited (the SDK's ``await_outcome``).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any

import proton
from proton.handlers import MessagingHandler
from proton.utils import BlockingConnection

from shared.amqp.connection import CONNECT_TIMEOUT, WireError

log = logging.getLogger(__name__)

DEAD_LETTER_CONDITION = "com.microsoft:dead-letter"


class Deliveries(MessagingHandler):
    """Keeps each arriving message with its delivery and its bytes, unsettled (nothing is accepted
    automatically), and the error Service Bus closed the link with."""

    def __init__(self) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=False)
        self.arrived: collections.deque[tuple[proton.Message, proton.Delivery, bytes]] = collections.deque()
        self.detached: proton.Condition | None = None
        """The error Service Bus closed the link with (a session's lock lost, say), or None."""

    def on_delivery(self, event: Any) -> None:
        # proton's own reading (handlers.recv_msg) with the bytes kept: a trigger hands them on as they came.
        delivery = event.delivery
        if not delivery.link.is_receiver:
            return
        if delivery.aborted:
            delivery.settle()
        elif delivery.readable and not delivery.partial:
            encoded = bytes(delivery.link.recv(delivery.pending))
            delivery.link.advance()
            message = proton.Message()
            try:
                message.decode(encoded)
            except proton.MessageException as error:
                # Not a message proton can read: given back (its delivery count grows, and Service Bus
                # dead-letters it past MaxDeliveryCount) rather than stalling the receiver.
                log.error("%s: a delivery is not an AMQP message (%s); abandoned", delivery.link.name, error)
                delivery.local.failed = True
                delivery.update(proton.Delivery.MODIFIED)
                delivery.settle()
                return
            self.arrived.append((message, delivery, encoded))

    def on_link_error(self, event: Any) -> None:
        # proton's default closes the whole connection; the receiver raises this at its next use instead,
        # and a management request (a renewal, a peek) still gets Service Bus's own answer.
        self.detached = event.link.remote_condition


def dead_letter_condition(reason: str | None, error_description: str | None) -> proton.Condition:
    """The error a dead-letter outcome carries: ``com.microsoft:dead-letter`` with the reason and the
    description in its info."""
    info = {
        proton.symbol("DeadLetterReason"): reason,
        proton.symbol("DeadLetterErrorDescription"): error_description,
    }
    return proton.Condition(
        DEAD_LETTER_CONDITION,
        error_description,
        {key: value for key, value in info.items() if value is not None},
    )


def settle(
    connection: BlockingConnection,
    deliveries: Deliveries,
    delivery: proton.Delivery,
    outcome: Any,
    what: str,
    *,
    undeliverable: bool = False,
    condition: proton.Condition | None = None,
    link_closed: Callable[[], None],
) -> None:
    """Settle ``delivery`` (``what`` names it in errors) with ``outcome`` and await Service Bus's answer;
    raises :class:`WireError` when it refuses or does not answer. ``link_closed`` raises why the link was
    closed when it was closed before an answer came."""
    if outcome == proton.Delivery.MODIFIED:
        delivery.local.failed = True
        delivery.local.undeliverable = undeliverable
    if condition is not None:
        delivery.local.condition = condition
    delivery.update(outcome)
    try:
        connection.wait(
            lambda: delivery.remote_state != 0 or delivery.settled or deliveries.detached is not None,
            timeout=CONNECT_TIMEOUT,
        )
        # Read before settling: a delivery settled on both sides is freed by proton.
        answer, refusal = delivery.remote_state, delivery.remote.condition
    except proton.Timeout:
        raise WireError(f"Service Bus did not confirm the settlement of {what}") from None
    finally:
        delivery.settle()
    if not answer:  # the link was closed before an answer came: say why
        link_closed()
    # Service Bus echoes the outcome it applied; one it cannot apply (a lost lock, say) comes back rejected
    # with its error. As azure-servicebus judges it (_pyamqp/receiver.py, check_disposition_outcome): a
    # rejected answer with an error always fails, and otherwise the echo must be what was asked.
    if answer == proton.Delivery.REJECTED and refusal is not None:
        raise WireError(f"settlement of {what} refused: {refusal}")
    if answer != outcome:
        raise WireError(f"settlement of {what} answered {answer}, not {outcome}")


__all__ = ["DEAD_LETTER_CONDITION", "Deliveries", "dead_letter_condition", "settle"]
