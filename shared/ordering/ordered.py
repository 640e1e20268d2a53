"""One message of an ordered endpoint: handle it, hold its key, park it, or release the key.

The trigger of an ordered endpoint is session-enabled, so this runs for one message of a key at a time, in
the key's order. What happens depends on the key's row (:mod:`shared.ordering.held_keys`):

- **No row** (the key flows): the handlers run. A permanent failure dead-letters the message and writes
  the row first, naming it as the blocker. A message on its last delivery gets the row *before* its
  handlers run, so a crash or a final transient failure (the broker then dead-letters it as
  ``MaxDeliveryCountExceeded``) still holds the key; it is removed when the handlers succeed.
- **Held by another message**: the message is parked in the hold queue, in order (:mod:`.parking`).
- **Held by this message** (the blocker came back: re-drive, console retry): the handlers run; on success
  the key is released.
- **A resume signal** (the blocker was archived, or a release was interrupted): the key is released.

**The key's storage unreachable**: the invocation waits for it (up to :attr:`KeyHolding.storage_patience`,
inside the host's lock renewal), retrying, rather than failing at once. Failing would spend a delivery per
attempt; an outage longer than MaxDeliveryCount attempts would then have the broker dead-letter the message
with no row to hold its key, and the key's later messages would overtake it. While the invocation waits it
holds the key's session, so none of them can.

Releasing handles the parked messages first, oldest first, each settled in the hold queue, then deletes
the row. While the row says ``releasing``, every newer message is parked behind the others and the release
carries on, so nothing overtakes. A parked message that fails permanently becomes the new blocker (in the
hold queue's dead-letter queue); a transient failure leaves it at the head and sends a resume signal, so the
release carries on later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from azure.core.exceptions import AzureError, HttpResponseError
from azure.servicebus import ServiceBusClient

from shared.handlers.dispatch import Complete, DeadLetter, Outcome, Retry
from shared.handlers.endpoints import Endpoint
from shared.handlers.subscriber import Transport, process
from shared.messages import IncomingMessage
from shared.ordering.held_keys import HELD, RELEASING, HeldKey, HeldKeys
from shared.ordering.parking import park, parked_messages, resume_target, send_resume

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace

log = logging.getLogger(__name__)

MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"
MISSING_SESSION_ID = "MissingSessionId"
PARKED = "busbar.hold.parked"
RESUMED = "busbar.hold.resume"


@dataclass(frozen=True, slots=True)
class KeyHolding:
    """Where an ordered endpoint keeps its held keys and their parked messages."""

    queue: str
    """The endpoint's input queue (hierarchy-prefixed): the held keys' partition and the resume target."""
    held_queue: str
    keys: HeldKeys
    client: ServiceBusClient
    """Sends the resume signals (Busbar's own messages)."""
    wire: Namespace
    """Parks the copies and receives them back (Busbar's own AMQP sender and receiver: every property with
    its AMQP type)."""
    max_delivery_count: int
    """The input queue's MaxDeliveryCount: a message on that delivery holds its key before it runs."""
    storage_patience: float = 240.0
    """Seconds an invocation waits for the key's storage to answer again (well inside host.json's
    ``maxAutoLockRenewalDuration``, 10 minutes, so the session stays locked meanwhile)."""


def _unreachable(error: AzureError) -> bool:
    """Whether ``error`` says the storage did not answer (a refused connection, a timeout, a 5xx), as
    opposed to an answer about the row (not found, changed), which waiting would not change."""
    if isinstance(error, HttpResponseError):
        return error.status_code is None or error.status_code >= 500
    return True


def _patiently[T](holding: KeyHolding, key: str, what: str, call: Callable[[], T]) -> T:
    """``call()``, retried while the key's storage is unreachable, for up to ``storage_patience`` seconds."""
    deadline = time.monotonic() + holding.storage_patience
    pause = 1.0
    while True:
        try:
            return call()
        except AzureError as error:
            if not _unreachable(error) or time.monotonic() + pause > deadline:
                raise
            log.warning(
                "%s: storage unreachable while %s key %s; the key's messages wait (retrying in %.0f s): %s",
                holding.queue,
                what,
                key,
                pause,
                type(error).__name__,
            )
        time.sleep(pause)
        pause = min(pause * 2, 15.0)


def _blocker(holding: KeyHolding, message: IncomingMessage, reason: str, status: str = HELD) -> HeldKey:
    return HeldKey(
        queue=holding.queue,
        key=message.session_id or "",
        status=status,
        blocker_message_id=message.message_id,
        blocker_sequence_number=message.sequence_number,
        reason=reason,
        since=datetime.now(UTC),
    )


def _no_op(kind: str) -> Complete:
    return Complete(event_type=kind, handlers=())


def process_ordered(
    endpoint: Endpoint, message: IncomingMessage, transport: Transport, holding: KeyHolding
) -> Outcome:
    """What to do with ``message`` of the ordered ``endpoint`` (see the module docstring)."""
    key = message.session_id
    if not key:  # a session-enabled queue holds none: refused at send, so only a broker bug gets here
        return DeadLetter(MISSING_SESSION_ID, "a message of an ordered endpoint has no SessionId")
    held = _patiently(holding, key, "reading", lambda: holding.keys.get(holding.queue, key))
    signal = resume_target(message)
    if signal is not None:
        if held is not None and (held.status == RELEASING or not signal or held.blocker_message_id == signal):
            _release(endpoint, transport, holding, held)
        else:
            log.info(
                "%s: resume signal for %s ignored (the key is not held by %s)", endpoint.name, key, signal
            )
        return _no_op(RESUMED)
    if held is None:
        return _handle_flowing(endpoint, message, transport, holding)
    if held.blocked_by(message.message_id):
        outcome = process(endpoint, message, transport)
        if isinstance(outcome, Complete):
            log.info(
                "%s: blocker %s of %s handled: releasing the key", endpoint.name, message.message_id, key
            )
            _release(endpoint, transport, holding, held)
        elif isinstance(outcome, DeadLetter):
            holding.keys.put(replace(held, reason=outcome.reason))
        return outcome
    park(holding.wire, holding.held_queue, message)
    holding.keys.put(replace(held, parked=held.parked + 1))
    log.info(
        "%s: message %s of %s parked behind %s (%d parked)",
        endpoint.name,
        message.message_id,
        key,
        held.blocker_message_id,
        held.parked + 1,
    )
    if held.status == RELEASING:  # an interrupted release: carry on, this message last
        _release(endpoint, transport, holding, holding.keys.get(holding.queue, key) or held)
    return _no_op(PARKED)


def _handle_flowing(
    endpoint: Endpoint, message: IncomingMessage, transport: Transport, holding: KeyHolding
) -> Outcome:
    tentative = None
    if (message.delivery_count or 0) >= holding.max_delivery_count:
        row = _blocker(holding, message, MAX_DELIVERY_COUNT_EXCEEDED)
        tentative = _patiently(holding, row.key, "holding", lambda: holding.keys.put(row))
    outcome = process(endpoint, message, transport)
    if isinstance(outcome, DeadLetter):
        row = _blocker(holding, message, outcome.reason)
        holding.keys.put(row if tentative is None else replace(row, etag=tentative.etag))
        log.warning(
            "%s: key %s is held by %s (%s)",
            endpoint.name,
            message.session_id,
            message.message_id,
            outcome.reason,
        )
    elif isinstance(outcome, Complete) and tentative is not None:
        holding.keys.delete(tentative)
    return outcome


def _release(endpoint: Endpoint, transport: Transport, holding: KeyHolding, held: HeldKey) -> None:
    if held.status != RELEASING:
        held = holding.keys.put(replace(held, status=RELEASING))
    handled = 0
    with parked_messages(holding.wire, holding.held_queue, held.key) as parked:
        while (item := parked.next()) is not None:
            received, message = item
            outcome = process(endpoint, message, transport)
            if isinstance(outcome, Complete):
                parked.complete(received)
                handled += 1
                continue
            attempt = (message.delivery_count or 0) + 1  # a receiver counts earlier deliveries (the header's)
            last = attempt >= holding.max_delivery_count
            if isinstance(outcome, Retry) and not last:
                parked.abandon(received)
                send_resume(holding.client, holding.queue, held.key, None)
                log.warning(
                    "%s: release of %s paused after %d: %s (a resume signal carries on)",
                    endpoint.name,
                    held.key,
                    handled,
                    outcome.description,
                )
                return
            reason, description = (
                (outcome.reason, outcome.description)
                if isinstance(outcome, DeadLetter)
                else (
                    MAX_DELIVERY_COUNT_EXCEEDED,
                    f"handled {attempt} times: {outcome.description}",
                )
            )
            holding.keys.put(
                replace(
                    _blocker(holding, message, reason),
                    etag=held.etag,
                    parked=max(held.parked - handled - 1, 0),
                )
            )
            parked.dead_letter(received, reason, description)
            log.warning(
                "%s: key %s is held again, by parked message %s (%s)",
                endpoint.name,
                held.key,
                message.message_id,
                reason,
            )
            return
    holding.keys.delete(held)
    log.info("%s: key %s released: %d parked message(s) handled in order", endpoint.name, held.key, handled)
