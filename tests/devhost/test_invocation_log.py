"""The invocation log: a devhost left running keeps a bounded number of records; counts stay exact; waiters
in other threads see what they wait for."""

from __future__ import annotations

import threading
import time

import pytest

from devhost.invocation_log import InvocationLog


def _finish(log: InvocationLog, n: int, *, name: str = "f", error: str | None = None) -> None:
    for i in range(n):
        log.finished(name, f"id-{i}", "reason", time.perf_counter(), error)


def test_only_the_last_records_are_kept_and_the_count_stays_exact() -> None:
    log = InvocationLog(retain=3)
    _finish(log, 5)

    assert log.count == 5
    assert [r.invocation_id for r in log.records] == ["id-2", "id-3", "id-4"]


def test_a_count_past_what_is_kept_can_be_waited_for() -> None:
    log = InvocationLog(retain=2)
    _finish(log, 4)

    records = log.wait_for(4, timeout=1)

    assert [r.invocation_id for r in records] == ["id-2", "id-3"]


def test_a_waiter_in_another_thread_wakes_when_its_count_is_reached() -> None:
    log = InvocationLog()
    seen: list[int] = []
    waiter = threading.Thread(target=lambda: seen.append(len(log.wait_for(3, timeout=10))))
    waiter.start()
    _finish(log, 2)
    time.sleep(0.05)
    assert seen == []  # two of three: still waiting
    _finish(log, 1)
    waiter.join(5)

    assert seen == [3]


def test_a_predicate_waiter_is_woken_by_each_invocation() -> None:
    log = InvocationLog()
    seen: list[str] = []

    def wait() -> None:
        records = log.wait_for(lambda rs: any(not r.succeeded for r in rs), timeout=10)
        seen.append(records[-1].outcome)

    waiter = threading.Thread(target=wait)
    waiter.start()
    _finish(log, 2)
    _finish(log, 1, error="ValueError: boom")
    waiter.join(5)

    assert seen == ["Failed"]


def test_a_wait_that_times_out_says_how_many_finished() -> None:
    log = InvocationLog(retain=2)
    _finish(log, 3)

    with pytest.raises(TimeoutError, match=r"within 0\.1 s; have 3: "):
        log.wait_for(4, timeout=0.1)


def test_retaining_no_record_is_refused() -> None:
    with pytest.raises(ValueError, match="retain must be at least 1, got 0"):
        InvocationLog(retain=0)
