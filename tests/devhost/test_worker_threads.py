"""The worker threads plain functions run on: the Python worker's thread-pool policy, a leaner handoff."""

from __future__ import annotations

import asyncio
import threading

import pytest

from devhost.worker_threads import WorkerThreads


def test_a_call_runs_on_a_worker_thread_and_its_result_reaches_the_event_loop() -> None:
    async def scenario() -> tuple[str, str]:
        threads = WorkerThreads(2)
        try:
            name = await threads.run(lambda: threading.current_thread().name)
            return name, threading.current_thread().name
        finally:
            threads.shutdown()

    worker, loop_thread = asyncio.run(scenario())
    assert worker.startswith("devhost-worker_")
    assert worker != loop_thread


def test_an_idle_thread_is_reused_instead_of_starting_another() -> None:
    async def scenario() -> set[int]:
        threads = WorkerThreads(4)
        try:
            return {await threads.run(threading.get_ident) for _ in range(5)}
        finally:
            threads.shutdown()

    assert len(asyncio.run(scenario())) == 1


def test_an_exception_raised_by_the_call_is_raised_to_the_awaiting_coroutine() -> None:
    def fail() -> None:
        raise ValueError("boom")

    async def scenario() -> None:
        threads = WorkerThreads(1)
        try:
            await threads.run(fail)
        finally:
            threads.shutdown()

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(scenario())


def test_calls_beyond_max_workers_wait_for_a_free_thread_and_run_in_order() -> None:
    release = threading.Event()
    order: list[str] = []

    def blocking() -> None:
        release.wait(10)
        order.append("first")

    async def scenario() -> int:
        threads = WorkerThreads(1)
        try:
            first = threads.run(blocking)
            second = threads.run(lambda: order.append("second"))
            third = threads.run(lambda: order.append("third"))
            await asyncio.sleep(0.05)
            waiting_while_blocked = len(order)
            release.set()
            await asyncio.gather(first, second, third)
            return waiting_while_blocked
        finally:
            threads.shutdown()

    assert asyncio.run(scenario()) == 0
    assert order == ["first", "second", "third"]


def test_a_call_cancelled_while_waiting_for_a_thread_never_runs() -> None:
    release = threading.Event()
    ran: list[str] = []

    async def scenario() -> None:
        threads = WorkerThreads(1)
        try:
            busy = threads.run(lambda: release.wait(10))
            waiting = threads.run(lambda: ran.append("cancelled call"))
            waiting.cancel()
            after = threads.run(lambda: ran.append("next call"))
            release.set()
            await busy
            await after
        finally:
            threads.shutdown()

    asyncio.run(scenario())
    assert ran == ["next call"]


def test_shutdown_cancels_waiting_calls_lets_the_running_one_finish_and_refuses_new_ones() -> None:
    release = threading.Event()

    async def scenario() -> tuple[bool, bool]:
        threads = WorkerThreads(1)
        running = threads.run(lambda: release.wait(10))
        waiting = threads.run(lambda: None)
        threads.shutdown()
        with pytest.raises(RuntimeError, match="shut down"):
            threads.run(lambda: None)
        release.set()
        finished = await running
        await asyncio.sleep(0)  # the cancellation is posted to the loop
        return finished, waiting.cancelled()

    assert asyncio.run(scenario()) == (True, True)
