"""The worker: indexes the app once, then answers each ``InvocationRequest`` with an ``InvocationOutcome``
-- bind the input, run the function (``Invoker``), and for HTTP functions turn the return value into the
response. It never raises for a failing function, nor for arguments that cannot be bound: both end as a
failed outcome, as in the Python worker. Cancelling :meth:`FunctionWorker.invoke` cancels the invocation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from devhost.rpc.http_return import http_output
from devhost.rpc.runtime_invocation import RuntimeInvocations
from devhost.worker.binding import bind_arguments
from devhost.worker.indexing import WorkerFunction, index_functions
from devhost.worker.invoker import Invoker
from devhost.worker_protocol import FunctionMetadata, InvocationOutcome, InvocationRequest

HTTP_TRIGGER = "httpTrigger"


class FunctionWorker:
    """The function code's side of the boundary, for one app."""

    def __init__(
        self,
        functions: list[WorkerFunction],
        *,
        timeout: timedelta | None,
        app_directory: Path,
        thread_count: int | None = None,
        runtime_invocation: bool = False,
    ) -> None:
        self._functions = functions
        self._by_name = {function.metadata.name.lower(): function for function in functions}
        self.invoker = Invoker(timeout=timeout, app_directory=app_directory, thread_count=thread_count)
        # The worker process: azure_functions_runtime runs each invocation. In devhost's own process (the
        # in-process worker, for debuggers) the runtime may not own the process-wide state it keeps, so
        # devhost's invoker runs the function there, with the runtime's binding.
        self._runtime = (
            RuntimeInvocations([f.spec.runtime for f in functions], timeout=timeout)
            if runtime_invocation
            else None
        )

    @classmethod
    def load(
        cls,
        app_path: Path,
        settings: Mapping[str, str],
        *,
        timeout: timedelta | None,
        thread_count: int | None = None,
        runtime_invocation: bool = False,
    ) -> FunctionWorker:
        """Import and index ``app_path`` (raises AppLoadError, BindingError or ValueError if it cannot);
        ``runtime_invocation``: run invocations through azure_functions_runtime (the worker process)."""
        functions = index_functions(app_path, settings)
        return cls(
            functions,
            timeout=timeout,
            app_directory=app_path.resolve().parent,
            thread_count=thread_count,
            runtime_invocation=runtime_invocation,
        )

    def functions(self) -> list[FunctionMetadata]:
        """The indexed functions, in the app's order."""
        return [function.metadata for function in self._functions]

    async def invoke(self, request: InvocationRequest) -> InvocationOutcome:
        """Run one invocation; its outcome (never raises, except when cancelled)."""
        function = self._by_name.get(request.function_name.lower())
        if function is None:
            return InvocationOutcome(False, f"no function named '{request.function_name}'", "LookupError")
        if self._runtime is not None:
            metadata = function.metadata
            return await self._runtime.invoke(
                metadata.name, metadata.trigger_type, metadata.trigger_arg, request
            )
        bound: tuple[tuple[str, str], ...] = ()
        try:
            kwargs = bind_arguments(function, request.input)
            bound = tuple((name, _class_name(value)) for name, value in kwargs.items())
            result = await self.invoker.call(function.spec, kwargs, request.invocation_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return InvocationOutcome(False, str(exc), type(exc).__name__, bound)
        if function.metadata.trigger_type != HTTP_TRIGGER:
            return InvocationOutcome(True, bound=bound)
        try:
            response = http_output(result)
        except (TypeError, ValueError) as exc:  # as the runtime: the invocation fails
            return InvocationOutcome(False, str(exc), type(exc).__name__, bound)
        return InvocationOutcome(True, bound=bound, http=response)

    def close(self) -> None:
        """Stop the worker threads (running functions finish first)."""
        self.invoker.close()
        if self._runtime is not None:
            self._runtime.close()


def _class_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"
