"""Counts each endpoint invocation for the console's monitoring view (:mod:`shared.monitoring`), from the
delivery's one observation (:mod:`shared.delivery`, made by :func:`shared.telemetry.processing.processing`).

Handled, retried (abandoned, or raised before settling: the console's "retries") and dead-lettered come from
the observation's outcome; the processing time is the invocation's, settlement included; the critical time
runs from the broker enqueuing the message to the invocation's end. Recording is a lock and a few counters in
memory (the writes to storage happen on a background thread, :mod:`app.monitoring`), and an error in it is
logged, never raised: watching must not fail what it watches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.monitoring import recorder
from shared.delivery import Observation

logger = logging.getLogger("busbar.monitoring")


def monitoring(endpoint: str) -> Callable[[Observation], None]:
    """The observer that counts an invocation of ``endpoint`` (named by its input queue's path, as
    provisioned) in this process's monitoring record."""

    def record(observation: Observation) -> None:
        try:
            critical = observation.critical_seconds
            recorder().record(
                endpoint,
                observation.outcome,
                observation.ended,
                observation.seconds * 1000,
                None if critical is None else critical * 1000,
            )
        except Exception:
            logger.exception("monitoring: could not count an invocation of %s", endpoint)

    return record
