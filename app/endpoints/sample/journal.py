"""The sample's stand-in for a database: what its handlers handled, in memory and in the test probe.

Every sample handler notes what it handled in :data:`JOURNAL`, which ``make run`` logs (logger
``busbar.sample``) and, with ``BUSBAR_PROBE_RECORD``, appends to the durable test probe of :mod:`app.probe`,
which the chaos run accounts with and the end-to-end tests read (the handlers run in the worker process).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from app import probe
from shared.handlers import HandlerContext

logger = logging.getLogger("busbar.sample")


@dataclass(frozen=True, slots=True)
class HandledEvent:
    """One handler call: which endpoint, which contract arrived (concrete name) and the message id."""

    endpoint: str
    contract: str
    key: str  # the order or customer id
    message_id: str | None
    correlation_id: str | None
    detail: str = ""  # what the handler recorded (a customer's name)


class Journal:
    """A bounded, thread-safe record of handled events (the sample endpoints' "database")."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._entries: deque[HandledEvent] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def note(self, endpoint: str, contract: str, key: str, context: HandlerContext, detail: str = "") -> None:
        entry = HandledEvent(endpoint, contract, key, context.message_id, context.correlation_id, detail)
        with self._lock:
            self._entries.append(entry)
        probe.record(
            {
                "endpoint": endpoint,
                "contract": contract,
                "key": key,
                "message_id": context.message_id,
                "correlation_id": context.correlation_id,
                "delivery_count": context.incoming.delivery_count,
                "detail": detail,
            }
        )
        logger.info("%s handled %s for %s (message %s)", endpoint, contract, key, context.message_id)

    def entries(self, key: str | None = None) -> list[HandledEvent]:
        """Everything handled, oldest first; only entries about ``key`` when given."""
        with self._lock:
            return [e for e in self._entries if key is None or e.key == key]


JOURNAL = Journal()
