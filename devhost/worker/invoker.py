"""Call a user function as the Python worker does: coroutines on the event loop, plain functions in a
thread pool (``PYTHON_THREADPOOL_THREAD_COUNT``, default min(32, cpus + 4) as ThreadPoolExecutor), bounded by
functionTimeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import azure.functions as func
from azure.functions import _abc

from devhost.worker.app_loader import FunctionSpec
from devhost.worker_threads import WorkerThreads


class FunctionTimeoutError(TimeoutError):
    """The invocation ran longer than host.json's functionTimeout."""


class _TraceContext(_abc.TraceContext):
    def __init__(self) -> None:
        self._parent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-00"

    @property
    def trace_state(self) -> str:
        return ""

    @property
    def trace_parent(self) -> str:
        return self._parent

    @property
    def attributes(self) -> dict[str, str]:
        return {}


class _RetryContext(_abc.RetryContext):
    """Service Bus, HTTP and (without a policy) timer functions are never retried by the host."""

    @property
    def retry_count(self) -> int:
        return 0

    @property
    def max_retry_count(self) -> int:
        return 0

    @property
    def exception(self) -> Any:
        return None


class InvocationContext(func.Context):
    """``func.Context`` for one invocation."""

    _thread_local = threading.local

    def __init__(self, invocation_id: str, function_name: str, function_directory: str) -> None:
        self._invocation_id = invocation_id
        self._function_name = function_name
        self._function_directory = function_directory

    @property
    def invocation_id(self) -> str:
        return self._invocation_id

    @property
    def thread_local_storage(self) -> type[threading.local]:
        return self._thread_local

    @property
    def function_name(self) -> str:
        return self._function_name

    @property
    def function_directory(self) -> str:
        return self._function_directory

    @property
    def trace_context(self) -> _abc.TraceContext:
        return _TraceContext()

    @property
    def retry_context(self) -> _abc.RetryContext:
        return _RetryContext()


class Invoker:
    """Runs a function with bound arguments and enforces the timeout."""

    def __init__(
        self,
        *,
        timeout: timedelta | None,
        app_directory: Path,
        thread_count: int | None = None,
    ) -> None:
        self.timeout = None if timeout is None else timeout.total_seconds()
        self.app_directory = str(app_directory)
        self.threads = WorkerThreads(thread_count, name_prefix="devhost-worker")

    async def call(self, spec: FunctionSpec, kwargs: dict[str, Any], invocation_id: str) -> Any:
        """Run ``spec`` with ``kwargs`` (plus ``func.Context`` if it asks) and return its value; raises what
        the function raises, or :class:`FunctionTimeoutError`."""
        context_arg = spec.context_arg
        if context_arg is not None and context_arg not in kwargs:
            kwargs[context_arg] = InvocationContext(invocation_id, spec.name, self.app_directory)
        return await self._run(spec, kwargs)

    async def _run(self, spec: FunctionSpec, kwargs: dict[str, Any]) -> Any:
        # asyncio.timeout cancels this task when the time is up; unlike wait_for it needs no extra task and
        # waiter future per invocation (they cost a measurable share of the per-message latency).
        deadline = asyncio.timeout(self.timeout)
        try:
            async with deadline:
                if spec.is_async:
                    return await spec.handler(**kwargs)
                call_context = contextvars.copy_context()
                return await self.threads.run(lambda: call_context.run(spec.handler, **kwargs))
        except TimeoutError as exc:
            if not deadline.expired():  # the function's own TimeoutError
                raise
            assert self.timeout is not None
            raise FunctionTimeoutError(
                f"Timeout value of {timedelta(seconds=self.timeout)} was exceeded by function: "
                f"Functions.{spec.name}"
            ) from exc

    def close(self) -> None:
        """Stop the worker threads (running ones finish first)."""
        self.threads.shutdown()
