"""Counts each endpoint invocation for the console's monitoring view (:mod:`shared.monitoring`).

The outcome is what the invocation did with its message, seen through its settlement: complete is handled,
abandon (or an exception with no settlement) is a failed attempt the broker retries, dead-letter is
dead-lettered. The processing time is the invocation's, settlement included; the critical time runs from
the broker enqueuing the message (``enqueued_time_utc``) to its settlement. Recording is a lock and a few
counters in memory (the writes to storage happen on a background thread, :mod:`app.monitoring`), and an
error in it is logged, never raised: watching must not fail what it watches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from azure.servicebus import ServiceBusReceivedMessage

from app.monitoring import recorder
from functions.message_actions import MessageActions
from shared.monitoring.minute_stats import Outcome

logger = logging.getLogger("busbar.monitoring")


class ObservedActions:
    """``actions``, noting which settlement the invocation made (:class:`MessageActions`)."""

    def __init__(self, actions: MessageActions) -> None:
        self._actions = actions
        self.outcome: Outcome | None = None

    def complete(self, message: ServiceBusReceivedMessage) -> None:
        self._actions.complete(message)
        self.outcome = Outcome.HANDLED

    def abandon(self, message: ServiceBusReceivedMessage) -> None:
        self._actions.abandon(message)
        self.outcome = Outcome.FAILED

    def deadletter(
        self,
        message: ServiceBusReceivedMessage,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        description = deadletter_error_description
        self._actions.deadletter(
            message, deadletter_reason=deadletter_reason, deadletter_error_description=description
        )
        self.outcome = Outcome.DEAD_LETTERED


def _critical_ms(message: ServiceBusReceivedMessage, now: datetime) -> float | None:
    enqueued = message.enqueued_time_utc
    if enqueued is None:
        return None
    if enqueued.tzinfo is None:
        enqueued = enqueued.replace(tzinfo=UTC)
    return max((now - enqueued).total_seconds() * 1000, 0.0)


@contextmanager
def monitored(
    endpoint: str, message: ServiceBusReceivedMessage, actions: MessageActions
) -> Iterator[MessageActions]:
    """Run an invocation of ``endpoint`` (named by its input queue's path, as provisioned) with the actions to
    settle ``message`` through, and count it."""
    started = time.monotonic()
    observed = ObservedActions(actions)
    raised = False
    try:
        yield observed
    except BaseException:
        raised = True
        raise
    finally:
        outcome = observed.outcome or (Outcome.FAILED if raised else None)
        if outcome is not None:
            try:
                now = datetime.now(UTC)
                elapsed_ms = (time.monotonic() - started) * 1000
                recorder().record(endpoint, outcome, now, elapsed_ms, _critical_ms(message, now))
            except Exception:
                logger.exception("monitoring: could not count an invocation of %s", endpoint)
