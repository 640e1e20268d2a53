"""Busbar's metrics, under OpenTelemetry's messaging names and, where they mean the same thing, NServiceBus's
(so dashboards built for NServiceBus endpoints read Busbar's too).

NServiceBus 10's meter ``NServiceBus.Core.Pipeline.Incoming`` records ``nservicebus.messaging.successes``,
``.failures``, ``.fetches`` (counters), and ``.handler_time``, ``.processing_time``, ``.critical_time``
(histograms, seconds); OpenTelemetry's messaging conventions define ``messaging.process.duration``
(histogram, seconds), ``messaging.client.sent.messages`` and ``messaging.client.consumed.messages``.
``.fetches`` means what ``messaging.client.consumed.messages`` does and ``.handler_time`` is not measured
(Busbar times the whole delivery): neither is recorded, each recording costs every delivery.
Busbar's recoverability counters (dead-lettered, re-driven, archived, replayed) are ``busbar.messages.*``.

Instruments are made once from the API's global meter provider: before an SDK is installed that is a proxy,
which the SDK's provider replaces when ``app.telemetry`` installs one, so making them at import is right.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from opentelemetry import metrics

from shared.telemetry.conventions import INSTRUMENTATION_SCOPE

_meter = metrics.get_meter(INSTRUMENTATION_SCOPE)

# Explicit bucket boundaries in seconds: the conventions' advice for messaging durations.
DURATION_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

process_duration = _meter.create_histogram(
    "messaging.process.duration",
    unit="s",
    description="Duration of processing one delivery: receive to settlement (endpoint, contract, outcome).",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
processing_time = _meter.create_histogram(
    "nservicebus.messaging.processing_time",
    unit="s",
    description="The time to process a successfully handled message (NServiceBus's name).",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
critical_time = _meter.create_histogram(
    "nservicebus.messaging.critical_time",
    unit="s",
    description="Enqueued by the broker to handled: how late a handled message's effects are.",
)
consumed = _meter.create_counter(
    "messaging.client.consumed.messages",
    unit="{message}",
    description="Deliveries the endpoints' triggers received.",
)
sent = _meter.create_counter(
    "messaging.client.sent.messages",
    unit="{message}",
    description="Messages published or sent (by the publish API and by handlers).",
)
successes = _meter.create_counter(
    "nservicebus.messaging.successes",
    unit="{message}",
    description="Messages handled and completed (NServiceBus's name).",
)
failures = _meter.create_counter(
    "nservicebus.messaging.failures",
    unit="{message}",
    description="Deliveries that failed: retried, dead-lettered or raised (NServiceBus's name).",
)
dead_lettered = _meter.create_counter(
    "busbar.messages.dead_lettered", unit="{message}", description="Messages Busbar dead-lettered."
)
redriven = _meter.create_counter(
    "busbar.messages.redriven", unit="{message}", description="Dead letters re-driven to their entity."
)
archived = _meter.create_counter(
    "busbar.messages.archived",
    unit="{message}",
    description="Messages written to the failure archive (dead letters not re-driven, unrouted events).",
)
replayed = _meter.create_counter(
    "busbar.messages.replayed", unit="{message}", description="Archived messages the replay job re-sent."
)


def count(counter: metrics.Counter, amount: int, attributes: Mapping[str, str]) -> None:
    """Add ``amount`` to ``counter`` (nothing for zero: an empty data point is noise)."""
    if amount > 0:
        counter.add(amount, dict(attributes))
