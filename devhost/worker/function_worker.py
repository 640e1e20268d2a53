"""The in-process worker: imports and indexes the app once (``devhost.worker.app_loader``, with the
runtime's loader), then answers each ``InvocationRequest`` with an ``InvocationOutcome`` -- bind the input
(the runtime's binding), run the function (``Invoker``), and for HTTP functions turn the return value into
the response (the runtime's encoder). It never raises for a failing function, nor for arguments that cannot
be bound: both end as a failed outcome, as in the Python worker. Cancelling :meth:`FunctionWorker.invoke`
cancels the invocation.

The worker process runs none of this: there the runtime itself imports, indexes and invokes
(``devhost.worker.process_loop``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from devhost.rpc.http_return import http_output
from devhost.worker.app_loader import FunctionSpec, load_app
from devhost.worker.binding import bind_arguments
from devhost.worker.invoker import Invoker
from devhost.worker_protocol import InvocationOutcome, InvocationRequest

HTTP_TRIGGER = "httpTrigger"


class FunctionWorker:
    """The function code's side of the boundary, for one app, in devhost's own process."""

    def __init__(
        self,
        functions: list[FunctionSpec],
        metadata: list[Any],
        *,
        timeout: timedelta | None,
        app_directory: Path,
        thread_count: int | None = None,
    ) -> None:
        self._functions = functions
        self._metadata = metadata
        self._by_name = {function.name.lower(): function for function in functions}
        self.invoker = Invoker(timeout=timeout, app_directory=app_directory, thread_count=thread_count)

    @classmethod
    def load(
        cls, app_path: Path, *, timeout: timedelta | None, thread_count: int | None = None
    ) -> FunctionWorker:
        """Import and index ``app_path`` (raises AppLoadError if it cannot)."""
        loaded = load_app(app_path)
        return cls(
            loaded.functions,
            loaded.metadata,
            timeout=timeout,
            app_directory=app_path.resolve().parent,
            thread_count=thread_count,
        )

    def indexed(self) -> list[Any]:
        """The runtime's ``RpcFunctionMetadata`` of each function, as a worker answers the host's
        ``FunctionsMetadataRequest``."""
        return list(self._metadata)

    def functions(self) -> list[FunctionSpec]:
        """The indexed functions, in the app's order."""
        return list(self._functions)

    async def invoke(self, request: InvocationRequest) -> InvocationOutcome:
        """Run one invocation; its outcome (never raises, except when cancelled)."""
        function = self._by_name.get(request.function_name.lower())
        if function is None:
            return InvocationOutcome(False, f"no function named '{request.function_name}'", "LookupError")
        bound: tuple[tuple[str, str], ...] = ()
        try:
            kwargs = bind_arguments(function, request.input)
            bound = tuple((name, _class_name(value)) for name, value in kwargs.items())
            result = await self.invoker.call(function, kwargs, request.invocation_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return InvocationOutcome(False, str(exc), type(exc).__name__, bound)
        if function.trigger_type != HTTP_TRIGGER:
            return InvocationOutcome(True, bound=bound)
        try:
            response = http_output(result)
        except (TypeError, ValueError) as exc:  # as the runtime: the invocation fails
            return InvocationOutcome(False, str(exc), type(exc).__name__, bound)
        return InvocationOutcome(True, bound=bound, http=response)

    def close(self) -> None:
        """Stop the worker threads (running functions finish first)."""
        self.invoker.close()


def _class_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"
