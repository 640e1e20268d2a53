"""The worker threads plain (``def``) functions run on, as the Python worker runs them in a thread pool.

Same policy as the worker's ``ThreadPoolExecutor``: at most ``max_workers`` threads (default
``min(32, cpus + 4)``), started on demand and kept for reuse, calls beyond that wait in order, a running
call cannot be interrupted. The handoff is leaner than ``loop.run_in_executor``: an idle thread waits on
its own queue for the next call and hands the outcome straight to the event loop, with no
``concurrent.futures`` future chained to an asyncio one. At one call in flight the thread hop is a large
part of what a plain function adds to each invocation, so this shows in throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

_Call = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class WorkerThreads:
    """A bounded pool of reusable threads that run calls for an event loop."""

    def __init__(self, max_workers: int | None = None, *, name_prefix: str = "devhost-worker") -> None:
        if max_workers is not None and max_workers <= 0:
            raise ValueError("max_workers must be greater than 0")
        self.max_workers = max_workers or min(32, (os.cpu_count() or 1) + 4)
        self._name_prefix = name_prefix
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[_Call | None]] = []  # last used first: its thread is warm
        self._backlog: deque[_Call] = deque()
        self._started = 0
        self._closed = False

    def run(self, function: Callable[[], Any]) -> asyncio.Future[Any]:
        """Run ``function`` on a worker thread; the future (on the running loop) gets its outcome.

        Cancelling the future skips a call still waiting for a thread; a running call runs to its end."""
        loop = asyncio.get_running_loop()
        call: _Call = (function, loop, loop.create_future())
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker threads are shut down")
            if self._idle:
                inbox = self._idle.pop()
            elif self._started < self.max_workers:
                self._started += 1
                inbox = queue.SimpleQueue()
                threading.Thread(
                    target=self._serve,
                    args=(inbox,),
                    name=f"{self._name_prefix}_{self._started - 1}",
                    daemon=True,  # a hung function must not keep the process alive
                ).start()
            else:
                self._backlog.append(call)
                return call[2]
        inbox.put(call)
        return call[2]

    def _serve(self, inbox: queue.SimpleQueue[_Call | None]) -> None:
        call = inbox.get()
        while call is not None:
            outcome = _perform(call)
            with self._lock:
                following = self._backlog.popleft() if self._backlog else None
                closed = self._closed
                if following is None and not closed:
                    # idle again before the result is out, so the next call finds this (warm) thread
                    self._idle.append(inbox)
            if outcome is not None:
                _post(*outcome)
            if following is not None:
                call = following
            elif closed:
                return
            else:
                call = inbox.get()

    def shutdown(self) -> None:
        """Stop the threads once idle (running calls finish first); calls still waiting are cancelled."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            backlog, self._backlog = list(self._backlog), deque()
        for inbox in idle:
            inbox.put(None)
        for _, loop, future in backlog:
            _post(loop, future.cancel)


def _perform(call: _Call) -> tuple[asyncio.AbstractEventLoop, Callable[..., None], Any, Any] | None:
    """Run the call; what to post to its loop (None if it was cancelled while waiting: skipped)."""
    function, loop, future = call
    if future.cancelled():
        return None
    try:
        return loop, _succeed, future, function()
    except BaseException as exc:  # handed to the awaiting invocation, as an executor does
        return loop, _fail, future, exc


def _post(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits the outcome any more
        loop.call_soon_threadsafe(callback, *args)


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
