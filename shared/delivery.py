"""What became of one delivery of a message to an endpoint, observed once: through the trigger's own
settlement object, with one timer. Pure (no SDK, no I/O).

The processing span and metrics (:mod:`shared.telemetry.processing`) and the console's per-minute monitoring
(:mod:`shared.monitoring`) are both fed from the one :class:`Observation` a delivery ends with, so they
cannot disagree about its outcome, its processing time or its critical time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol


class Outcome(StrEnum):
    """What became of a delivery (``busbar.outcome`` on the span and the metrics; the monitoring's counts)."""

    HANDLED = "handled"
    """Completed: the handlers succeeded (or the message was parked behind its held key)."""
    RETRIED = "retried"
    """Abandoned: the broker delivers it again at once."""
    DEAD_LETTERED = "dead_lettered"
    """Moved to the dead-letter queue by the function."""
    FAILED = "failed"
    """The invocation raised (or returned) without settling: redelivered when the message's lock expires."""


class Settlement(Protocol):
    """Explicit settlement of a Service Bus trigger's message: the part of the SDK-type binding's
    ``ServiceBusMessageActions`` (``azurefunctions-extensions-bindings-servicebus``, which devhost binds too)
    Busbar relies on, with the extension's own parameter names. That package ships no type information, so
    this Protocol types it: a typing aid only."""

    def complete(self, message: Any) -> None:
        """Remove ``message`` from its entity: it was handled."""

    def abandon(self, message: Any) -> None:
        """Release ``message`` for redelivery now (its delivery count goes up)."""

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        """Move ``message`` to its entity's dead-letter queue now."""


@dataclass(frozen=True, slots=True)
class DeadLettering:
    """Why the function dead-lettered the message, and when (``time.time_ns()``: a span event's clock)."""

    reason: str
    description: str
    at_ns: int


@dataclass(frozen=True, slots=True)
class Observation:
    """One delivery, seen at its end."""

    outcome: Outcome
    ended: datetime
    """When the invocation ended (UTC): the minute the monitoring counts it in."""
    seconds: float
    """How long the invocation took, settlement included."""
    critical_seconds: float | None
    """From the broker enqueuing the message to the invocation's end; None when the enqueued time is
    unknown. Only a handled message's counts, as NServiceBus's critical time does."""
    dead_lettering: DeadLettering | None = None


class ObservedSettlement:
    """Settles through ``actions`` and notes the settlement; :meth:`observation` ends the delivery."""

    def __init__(self, actions: Settlement, enqueued_time: datetime | None) -> None:
        self._actions = actions
        self._enqueued_time = enqueued_time
        self._started = time.perf_counter()
        self.outcome: Outcome | None = None
        self.dead_lettering: DeadLettering | None = None

    def complete(self, message: Any) -> None:
        """Complete ``message``: handled."""
        self._actions.complete(message)
        self.outcome = Outcome.HANDLED

    def abandon(self, message: Any) -> None:
        """Abandon ``message``: it will be delivered again."""
        self._actions.abandon(message)
        self.outcome = Outcome.RETRIED

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        """Dead-letter ``message`` with its reason and description."""
        self._actions.deadletter(
            message,
            deadletter_reason=deadletter_reason,
            deadletter_error_description=deadletter_error_description,
        )
        self.outcome = Outcome.DEAD_LETTERED
        self.dead_lettering = DeadLettering(
            deadletter_reason or "", deadletter_error_description or "", time.time_ns()
        )

    def observation(self) -> Observation:
        """The delivery as it ends now: :attr:`Outcome.FAILED` when nothing settled it."""
        seconds = time.perf_counter() - self._started
        ended = datetime.now(UTC)
        return Observation(
            self.outcome or Outcome.FAILED,
            ended,
            seconds,
            critical_seconds(self._enqueued_time, ended),
            self.dead_lettering,
        )


def critical_seconds(enqueued_time: datetime | None, now: datetime) -> float | None:
    """Seconds from ``enqueued_time`` to ``now`` (never negative: the broker's clock may run ahead); a naive
    enqueued time is UTC, as the SDK's ``enqueued_time_utc`` is."""
    if enqueued_time is None:
        return None
    enqueued = enqueued_time if enqueued_time.tzinfo else enqueued_time.replace(tzinfo=UTC)
    return max((now - enqueued).total_seconds(), 0.0)
