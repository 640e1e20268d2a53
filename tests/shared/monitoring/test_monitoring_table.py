"""The monitoring rows in a real Table Storage (Azurite, as make run's): what instances write adds up per
minute when read back, a flush writes again without counting twice, and the queue samples come back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.data.tables import TableServiceClient

from shared.monitoring.flusher import Flusher
from shared.monitoring.minute_stats import MinuteStats, Outcome, QueueSample, minute_of
from shared.monitoring.recorder import Pending, Recorder
from shared.monitoring.table import PRUNE_PAGE, RETENTION, MonitoringTable
from tests.azurite import table_connection_string

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2026, 11, 29, 2, 15, 30, tzinfo=UTC)
MINUTE = minute_of(T0)


@pytest.fixture
def table() -> Iterator[MonitoringTable]:
    service = TableServiceClient.from_connection_string(table_connection_string())
    store = MonitoringTable(service.get_table_client(f"mon{uuid.uuid4().hex[:12]}"))
    yield store
    store.close()


def stats(handled: int, *milliseconds: float) -> MinuteStats:
    numbers = MinuteStats()
    for i in range(handled):
        numbers.add(Outcome.HANDLED, milliseconds[i % len(milliseconds)], 50.0)
    numbers.add(Outcome.FAILED, 1.0, None)
    return numbers


def test_two_instances_minutes_add_up_and_a_rewrite_replaces_rather_than_adds(table: MonitoringTable) -> None:
    endpoint = f"billing-{uuid.uuid4().hex[:6]}"
    first = Pending(endpoint, MINUTE, stats(3, 10.0), 1)
    table.write("host-a/17", [first])
    table.write("host-a/17", [first])  # the same running totals again: a later flush of an unchanged minute
    table.write("host-b/17", [Pending(endpoint, MINUTE, stats(2, 400.0), 1)])
    table.write("host-a/17", [Pending(endpoint, MINUTE + timedelta(minutes=1), stats(1, 10.0), 1)])

    history = table.history(endpoint, MINUTE, MINUTE)
    assert list(history.minutes) == [MINUTE]  # the next minute is outside the span asked for
    merged = history.minutes[MINUTE]
    assert (merged.handled, merged.failed) == (5, 2)
    assert merged.processing.total == merged.critical.total == 5
    both = table.history(endpoint, MINUTE - timedelta(minutes=5), MINUTE + timedelta(minutes=1))
    assert {minute: s.handled for minute, s in both.minutes.items()} == {
        MINUTE: 5,
        MINUTE + timedelta(minutes=1): 1,
    }
    # Another endpoint's partition is its own.
    assert table.history(f"shipping-{uuid.uuid4().hex[:6]}", MINUTE, MINUTE).minutes == {}


def test_queue_samples_come_back_beside_the_minutes_and_the_latest_of_a_minute_wins(
    table: MonitoringTable,
) -> None:
    endpoint = f"shipping-{uuid.uuid4().hex[:6]}"
    table.write_queue_sample(endpoint, QueueSample(MINUTE, 9, 0))
    table.write_queue_sample(endpoint, QueueSample(MINUTE, 4, 1))
    table.write("i1", [Pending(endpoint, MINUTE, stats(1, 3.0), 1)])
    history = table.history(endpoint, MINUTE, MINUTE)
    assert history.queue == {MINUTE: QueueSample(MINUTE, 4, 1)}
    assert history.minutes[MINUTE].handled == 1


def test_a_flusher_writes_an_instances_record_into_the_table(table: MonitoringTable) -> None:
    endpoint = f"crm-{uuid.uuid4().hex[:6]}"
    recorder = Recorder()
    flusher = Flusher(recorder, lambda items: table.write("instance-1", items), clock=lambda: T0)
    for milliseconds in (4.0, 5.0, 6.0):
        recorder.record(endpoint, Outcome.HANDLED, T0, milliseconds, 20.0)
    recorder.record(endpoint, Outcome.DEAD_LETTERED, T0, 2.0, None)
    assert flusher.flush() is True
    assert recorder.pending() == []
    stored = table.history(endpoint, MINUTE, MINUTE).minutes[MINUTE]
    assert (stored.handled, stored.dead_lettered) == (3, 1)
    median = stored.processing.quantile(0.5)
    assert median is not None and median > 0


def test_rows_past_the_retention_are_pruned_a_page_at_a_time_and_recent_ones_stay(
    table: MonitoringTable,
) -> None:
    endpoint = f"sales-{uuid.uuid4().hex[:6]}"
    now = T0 + RETENTION + timedelta(minutes=1)
    old = [Pending(endpoint, MINUTE - timedelta(minutes=i), stats(1, 2.0), 1) for i in range(PRUNE_PAGE + 3)]
    table.write("i1", old)
    table.write("i1", [Pending(endpoint, minute_of(now), stats(2, 2.0), 1)])
    table.write_queue_sample(endpoint, QueueSample(MINUTE, 1, 0))

    assert table.prune(endpoint, now) == PRUNE_PAGE
    assert table.prune(endpoint, now) == 4  # the rest: 3 minutes and the queue sample
    assert table.prune(endpoint, now) == 0
    span = table.history(endpoint, MINUTE - timedelta(minutes=PRUNE_PAGE + 3), minute_of(now))
    assert {minute: s.handled for minute, s in span.minutes.items()} == {minute_of(now): 2}
    assert span.queue == {}
