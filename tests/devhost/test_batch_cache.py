"""The minimum-batch cache, pinned against the extension's ServiceBusMessageManager and its wait cycle."""

from __future__ import annotations

from devhost.batch_cache import BatchCache


def test_messages_wait_until_the_minimum_and_a_batch_takes_at_most_the_maximum_oldest_first() -> None:
    cache: BatchCache[int] = BatchCache(max_size=4, min_size=3)
    assert cache.enabled
    assert cache.take([1, 2], now=10.0) == []
    assert len(cache) == 2 and cache.waiting_since == 10.0
    assert cache.take([3, 4, 5], now=11.0) == [1, 2, 3, 4]
    # what is left waits again, its wait counted from this batch (the extension restarts its cycle)
    assert len(cache) == 1 and cache.waiting_since == 11.0


def test_waiting_messages_fall_due_after_the_wait_and_go_out_as_a_partial_batch() -> None:
    cache: BatchCache[str] = BatchCache(max_size=10, min_size=5)
    cache.take(["a"], now=0.0)
    cache.take(["b"], now=2.0)
    assert not cache.due(2.9, 3.0)
    assert cache.due(3.0, 3.0)
    assert cache.take(partial=True, now=3.0) == ["a", "b"]
    assert len(cache) == 0 and cache.waiting_since is None and not cache.due(100.0, 3.0)


def test_a_minimum_of_one_means_no_waiting() -> None:
    cache: BatchCache[int] = BatchCache(max_size=1000, min_size=1)
    assert not cache.enabled
    assert cache.take([1], now=0.0) == [1]
    assert cache.take(partial=True) == []
