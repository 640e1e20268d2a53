"""The monitoring aggregation: fixed-bucket percentiles, minute bucketing, one instance's record and its
flushes, and adding instances' minutes together into the console's view. Pure: no storage, no clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from shared.monitoring.flusher import Flusher
from shared.monitoring.histogram import BUCKETS, Histogram, bucket_of, representative, upper_bound
from shared.monitoring.minute_stats import EndpointHistory, MinuteStats, Outcome, QueueSample, minute_of
from shared.monitoring.recorder import KEEP_MINUTES, Pending, Recorder
from shared.monitoring.view import EndpointNow, monitoring_view

pytestmark = pytest.mark.timeout(30)

T0 = datetime(2026, 11, 29, 2, 15, 30, tzinfo=UTC)


def within_a_bucket(reported: float | None, true: float) -> bool:
    return reported is not None and true / 1.2 <= reported <= true * 1.2


def test_a_duration_falls_into_the_bucket_whose_bounds_enclose_it() -> None:
    for milliseconds in (0.05, 0.1, 0.37, 1.0, 12.5, 999.0, 61_000.0):
        bucket = bucket_of(milliseconds)
        assert milliseconds <= upper_bound(bucket)
        assert bucket == 0 or milliseconds > upper_bound(bucket - 1)
    assert bucket_of(10 * 3600 * 1000) == BUCKETS - 1  # ten hours: the last bucket takes it


def test_median_and_p95_are_read_back_within_a_bucket_of_the_true_values() -> None:
    histogram = Histogram()
    for milliseconds in range(1, 101):  # 1..100 ms: median 50, p95 95
        histogram.add(float(milliseconds))
    assert histogram.total == 100
    assert within_a_bucket(histogram.quantile(0.5), 50)
    assert within_a_bucket(histogram.quantile(0.95), 95)
    assert Histogram().quantile(0.5) is None


def test_a_lone_sample_is_its_own_median_and_p95_and_never_zero() -> None:
    histogram = Histogram()
    histogram.add(0.0)
    assert histogram.quantile(0.5) == histogram.quantile(0.95) == representative(0) > 0


def test_histograms_of_two_instances_merge_into_the_histogram_of_all_their_samples() -> None:
    first, second, both = Histogram(), Histogram(), Histogram()
    for i, milliseconds in enumerate([3.0, 8.0, 40.0, 41.0, 250.0, 900.0, 2.0]):
        (first if i % 2 else second).add(milliseconds)
        both.add(milliseconds)
    first.merge(second)
    assert first == both
    assert Histogram.from_json(first.to_json()) == both


def test_an_unreadable_stored_histogram_reads_as_empty() -> None:
    for text in ("", "not json", "[1, 2]", '{"x": 1, "999": 4, "3": -1}', None):
        assert Histogram.from_json(text).total == 0


def test_moments_are_bucketed_by_their_utc_minute() -> None:
    assert minute_of(T0) == datetime(2026, 11, 29, 2, 15, tzinfo=UTC)
    berlin = T0.astimezone(ZoneInfo("Europe/Berlin"))
    assert minute_of(berlin) == minute_of(T0)
    assert minute_of(T0.replace(tzinfo=None)) == minute_of(T0)


def test_only_handled_messages_carry_processing_and_critical_times() -> None:
    stats = MinuteStats()
    stats.add(Outcome.HANDLED, 12.0, 40.0)
    stats.add(Outcome.FAILED, 5000.0, 9000.0)
    stats.add(Outcome.DEAD_LETTERED, 7.0, None)
    assert (stats.handled, stats.failed, stats.dead_lettered) == (1, 1, 1)
    assert stats.processing.total == stats.critical.total == 1
    assert within_a_bucket(stats.processing.quantile(0.95), 12.0)


def test_the_recorder_hands_over_each_changed_minute_once_until_it_changes_again() -> None:
    recorder = Recorder()
    recorder.record("billing", Outcome.HANDLED, T0, 10.0, 20.0)
    recorder.record("billing", Outcome.HANDLED, T0, 12.0, 25.0)
    recorder.record("shipping", Outcome.FAILED, T0, 3.0, None)
    pending = recorder.pending()
    assert [(p.endpoint, p.stats.handled, p.stats.failed) for p in pending] == [
        ("billing", 2, 0),
        ("shipping", 0, 1),
    ]
    recorder.settle(pending, T0)
    assert recorder.pending() == []
    recorder.record("billing", Outcome.HANDLED, T0, 11.0, 21.0)
    [again] = recorder.pending()
    assert (again.endpoint, again.stats.handled) == ("billing", 3)  # the running total, not the delta


def test_a_minute_that_is_over_and_written_is_forgotten_and_a_new_minute_wakes_the_flusher() -> None:
    woken: list[bool] = []
    recorder = Recorder(on_new_minute=lambda: woken.append(True))
    recorder.record("billing", Outcome.HANDLED, T0, 10.0, 20.0)
    assert woken == []
    later = T0 + timedelta(minutes=1)
    recorder.record("billing", Outcome.HANDLED, later, 10.0, 20.0)
    assert woken == [True]
    recorder.settle(recorder.pending(), later)
    recorder.record("billing", Outcome.HANDLED, later, 10.0, 20.0)
    assert [p.minute for p in recorder.pending()] == [minute_of(later)]  # the closed minute is gone


def test_a_record_made_while_a_write_is_under_way_is_written_by_the_next_flush() -> None:
    recorder = Recorder()
    recorder.record("billing", Outcome.HANDLED, T0, 10.0, 20.0)
    taken = recorder.pending()
    recorder.record("billing", Outcome.HANDLED, T0, 10.0, 20.0)  # lands after the flusher took its copy
    recorder.settle(taken, T0 + timedelta(minutes=5))
    [left] = recorder.pending()
    assert left.stats.handled == 2


class FlakyStorage:
    """A writer that fails while ``down``, else keeps every row written, as the table would (replace)."""

    def __init__(self) -> None:
        self.down = False
        self.rows: dict[tuple[str, datetime], MinuteStats] = {}

    def write(self, items: list[Pending]) -> None:
        if self.down:
            raise ConnectionError("storage unreachable")
        for item in items:
            self.rows[(item.endpoint, item.minute)] = item.stats


def test_numbers_recorded_while_storage_is_down_are_kept_and_written_when_it_is_back() -> None:
    storage = FlakyStorage()
    now = [T0]
    flusher = Flusher(Recorder(), storage.write, clock=lambda: now[0])
    storage.down = True
    flusher.recorder.record("billing", Outcome.HANDLED, T0, 10.0, 20.0)
    assert flusher.flush() is False  # no exception: the invocations never see it
    now[0] = T0 + timedelta(minutes=2)
    flusher.recorder.record("billing", Outcome.HANDLED, now[0], 10.0, 20.0)
    storage.down = False
    assert flusher.flush() is True
    assert {minute: stats.handled for (_, minute), stats in storage.rows.items()} == {
        minute_of(T0): 1,
        minute_of(now[0]): 1,
    }


def test_an_outage_longer_than_the_kept_minutes_drops_the_oldest_numbers() -> None:
    storage = FlakyStorage()
    now = [T0]
    flusher = Flusher(Recorder(), storage.write, clock=lambda: now[0])
    storage.down = True
    flusher.recorder.record("billing", Outcome.HANDLED, T0, 10.0, 20.0)
    now[0] = T0 + timedelta(minutes=KEEP_MINUTES + 1)
    flusher.recorder.record("billing", Outcome.HANDLED, now[0], 10.0, 20.0)
    assert flusher.flush() is False
    assert [p.minute for p in flusher.recorder.pending()] == [minute_of(now[0])]


def test_the_view_adds_up_a_window_of_minutes_and_says_what_it_lacks() -> None:
    minute = minute_of(T0)
    busy, old = MinuteStats(), MinuteStats()
    for milliseconds in (5.0, 6.0, 7.0, 300.0):
        busy.add(Outcome.HANDLED, milliseconds, milliseconds * 2)
    busy.add(Outcome.FAILED, 1.0, None)
    old.add(Outcome.HANDLED, 1.0, 1.0)  # before the window: not counted
    history = EndpointHistory(
        {minute: busy, minute - timedelta(minutes=1): MinuteStats(), minute - timedelta(minutes=20): old},
        {minute: QueueSample(minute, 4, 1)},
    )
    endpoints = [
        EndpointNow("billing", "app1-billing", 4, 1),
        EndpointNow("shipping", "app1-shipping", None, None),
    ]
    # The history is the input queue's (the table's partition), wherever another app's "billing" is.
    body = monitoring_view(endpoints, {"app1-billing": history, "billing": history}, T0, minutes=15)
    billing, shipping = body["endpoints"]
    assert (billing["endpoint"], billing["queue"]) == ("billing", "app1-billing")
    assert (billing["handled"], billing["retries"], billing["deadLettered"]) == (4, 1, 0)
    assert billing["throughputPerMinute"] == round(4 / 15, 2)
    assert within_a_bucket(billing["processingMs"]["median"], 6.0)
    assert within_a_bucket(billing["processingMs"]["p95"], 300.0)
    assert within_a_bucket(billing["criticalMs"]["median"], 12.0)
    assert len(billing["series"]) == 15
    assert billing["series"][-1] == {
        "minute": minute.isoformat(),
        "handled": 4,
        "failed": 1,
        "deadLettered": 0,
        "queueLength": 4,
    }
    assert billing["series"][0]["queueLength"] is None
    assert (billing["queueLength"], billing["deadLetters"]) == (4, 1)
    assert shipping["handled"] == 0 and shipping["processingMs"] is None and shipping["queueLength"] is None
