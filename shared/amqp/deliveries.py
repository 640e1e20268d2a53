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
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a settlement asks for: proton's delivery state, ``modified`` undeliverable here or not, and the
    error a ``rejected`` one carries."""

    state: Any
    undeliverable: bool = False
    condition: proton.Condition | None = None


COMPLETE = Outcome(proton.Delivery.ACCEPTED)
ABANDON = Outcome(proton.Delivery.MODIFIED)
DEFER = Outcome(proton.Delivery.MODIFIED, undeliverable=True)


def delivery_tag(delivery: proton.Delivery) -> bytes:
    """A delivery's tag as the bytes it came as: proton's ``Delivery.tag`` decodes them as UTF-8 text, which a
    Service Bus lock token (a GUID's 16 bytes) seldom is; the decoding error carries the bytes it was given
    (``UnicodeDecodeError.object``), and valid UTF-8 encodes back to the same bytes."""
    try:
        return delivery.tag.encode("utf-8")
    except UnicodeDecodeError as error:
        return bytes(error.object)


def dead_letter(reason: str | None, error_description: str | None) -> Outcome:
    """A dead-letter outcome: ``rejected`` with ``com.microsoft:dead-letter``, the reason and the description
    in its info."""
    info = {
        proton.symbol("DeadLetterReason"): reason,
        proton.symbol("DeadLetterErrorDescription"): error_description,
    }
    condition = proton.Condition(
        DEAD_LETTER_CONDITION,
        error_description,
        {key: value for key, value in info.items() if value is not None},
    )
    return Outcome(proton.Delivery.REJECTED, condition=condition)


def settle_all(
    connection: BlockingConnection,
    deliveries: Deliveries,
    settlements: Sequence[tuple[proton.Delivery, Outcome, str]],
    link_closed: Callable[[], None],
) -> list[WireError | None]:
    """Settle each delivery with its outcome (``what`` names it in errors) and await Service Bus's answers:
    every outcome is sent before any answer is awaited, as concurrent settlements of the SDK's aio receiver
    share their round trip. Each one's error (refused, unanswered), or None. ``link_closed`` raises why the
    link was closed when it was closed before an answer came."""
    for delivery, outcome, _ in settlements:
        if outcome.state == proton.Delivery.MODIFIED:
            delivery.local.failed = True
            delivery.local.undeliverable = outcome.undeliverable
        if outcome.condition is not None:
            delivery.local.condition = outcome.condition
        delivery.update(outcome.state)

    def answered() -> bool:
        return deliveries.detached is not None or all(
            delivery.remote_state != 0 or delivery.settled for delivery, _, _ in settlements
        )

    with contextlib.suppress(proton.Timeout):  # each unanswered one says so below
        connection.wait(answered, timeout=CONNECT_TIMEOUT)
    return [_judged(delivery, outcome, what, link_closed) for delivery, outcome, what in settlements]


def _judged(
    delivery: proton.Delivery, outcome: Outcome, what: str, link_closed: Callable[[], None]
) -> WireError | None:
    # Read before settling: a delivery settled on both sides is freed by proton.
    answer, refusal = delivery.remote_state, delivery.remote.condition
    delivery.settle()
    if not answer:  # the link was closed before an answer came (say why), or no answer came in time
        try:
            link_closed()
        except WireError as closed:
            return closed
        return WireError(f"Service Bus did not confirm the settlement of {what}")
    # Service Bus echoes the outcome it applied; one it cannot apply (a lost lock, say) comes back rejected
    # with its error. As azure-servicebus judges it (_pyamqp/receiver.py, check_disposition_outcome): a
    # rejected answer with an error always fails, and otherwise the echo must be what was asked.
    if answer == proton.Delivery.REJECTED and refusal is not None:
        return WireError(f"settlement of {what} refused: {refusal}")
    if answer != outcome.state:
        return WireError(f"settlement of {what} answered {answer}, not {outcome.state}")
    return None


__all__ = [
    "ABANDON",
    "COMPLETE",
    "DEAD_LETTER_CONDITION",
    "DEFER",
    "Deliveries",
    "Outcome",
    "dead_letter",
    "delivery_tag",
    "settle_all",
]
