"""The minimum-batch cache, pinned against the extension's ServiceBusMessageManager and its wait cycle."""

from __future__ import annotations

from devhost.servicebus.batch_cache import BatchCache


def test_messages_wait_until_the_minimum_and_a_batch_takes_at_most_the_maximum_oldest_first() -> None:
    cache: BatchCache[int] = BatchCache(max_size=4, min_size=3)
    assert cache.enabled
    assert cache.take([1, 2], now=10.0) == []
    assert len(cache) == 2 and cache.waiting_since == 10.0
    assert cache.take([3, 4, 5], now=11.0) == [1, 2, 3, 4]
    # what is left waits again, its wait counted from this batch (the extension restarts its cycle)
    assert len(cache) == 1 and cache.waiting_since == 11.0


def test_waiting_messages_fall_due_after_the_wait_and_go_out_as_a_partial_batch() -> None:
    cache: BatchCache[str] = BatchCache(max_size=10, min_size=5, wait_seconds=3.0)
    assert cache.next_batch(["a"], now=0.0) == []
    assert cache.receive_wait(1.0, now=0.5, shortest=0.05) == 1.0
    assert cache.receive_wait(1.0, now=2.5, shortest=0.05) == 0.5  # the next receive ends when "a" is due
    assert cache.next_batch(["b"], now=2.0) == []
    assert not cache.due(2.9)
    assert cache.due(3.0)
    assert cache.next_batch([], now=3.0) == ["a", "b"]
    assert len(cache) == 0 and cache.waiting_since is None and not cache.due(100.0)
    assert cache.receive_wait(1.0, now=100.0, shortest=0.05) == 1.0


def test_a_minimum_of_one_means_no_waiting() -> None:
    cache: BatchCache[int] = BatchCache(max_size=1000, min_size=1)
    assert not cache.enabled
    assert cache.next_batch([1, 2], now=0.0) == [1, 2]
    assert len(cache) == 0 and cache.receive_wait(1.0, now=0.0, shortest=0.05) == 1.0
