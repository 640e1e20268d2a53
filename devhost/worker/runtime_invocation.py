"""Invocations run by ``azure_functions_runtime`` itself: the host's ``InvocationRequest`` goes to its
``invocation_request`` entry point, which binds the arguments, makes the ``func.Context``, runs the function
(a coroutine on the loop, a plain function on the runtime's thread pool, as in Azure) and answers the
``InvocationResponse``, exactly as Azure's Python 3.13 worker does. host.json's ``functionTimeout`` is the
host's (``devhost.channel.process_worker``), as in Azure.

Only in devhost's worker process, after the runtime's own ``worker_init_request`` imported and indexed the
app into its registry (``devhost.worker.runtime_driver``): the runtime keeps the functions in a module-global
registry (and its thread pool in a module global), so it must own the process, as it owns the worker in
Azure. The one thing devhost adds is a note of the classes of the arguments the runtime bound, which
devhost's invocation log records: observed with ``sys.monitoring`` (``devhost.worker.bound_arguments``),
the runtime and the app left as they are.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

from azure_functions_runtime.utils.executor import invocation_id_cv

from devhost.channel.protos import load as load_protos
from devhost.worker.bound_arguments import BoundArguments, BoundArgumentsMonitor
from devhost.worker.runtime_driver import RuntimeRequest

# The invocation a coroutine function runs for (the runtime sets its own context variable for plain
# functions only, in the thread it runs them on).
_ASYNC_INVOCATION: contextvars.ContextVar[str | None] = contextvars.ContextVar("invocation", default=None)


# The invocations running in this process, by id: their function's name (what a log record is tagged with).
_RUNNING: dict[str, str] = {}


def current_invocation() -> tuple[str, str] | None:
    """The invocation the calling code runs for (id, function name), as the Python worker finds it for a
    log record: a coroutine function's task, else the runtime's thread-pool thread."""
    invocation_id = _ASYNC_INVOCATION.get() or invocation_id_cv.get()
    if invocation_id is None:
        return None
    name = _RUNNING.get(invocation_id)
    return None if name is None else (invocation_id, name)


class RuntimeInvocations:
    """The worker's invocations, each through the runtime's ``invocation_request``."""

    def __init__(self, indexed: Sequence[Any]) -> None:
        """``indexed``: the runtime's ``RpcFunctionMetadata`` of each function it indexed."""
        from azure_functions_runtime import handle_event
        from azure_functions_runtime.utils import threadpool

        self._events = handle_event
        self._threadpool = threadpool
        self.protos = load_protos()
        # The proxy worker starts the runtime's pool (PYTHON_THREADPOOL_THREAD_COUNT, read from the
        # environment the host gave the worker process).
        threadpool.start_threadpool_executor()
        self._names = {metadata.function_id: metadata.name for metadata in indexed}  # function id -> name
        self._bound = BoundArgumentsMonitor(_ASYNC_INVOCATION, _RUNNING)

    async def invoke(self, message: Any) -> tuple[Any, BoundArguments]:
        """Run the host's ``InvocationRequest`` (``message``, a ``StreamingMessage``) through the runtime:
        its ``InvocationResponse`` (binding and function failures included) and the classes of the arguments
        the runtime bound."""
        protos = self.protos
        invocation = message.invocation_request
        invocation_id = invocation.invocation_id
        name = self._names.get(invocation.function_id, invocation.function_id)
        request = RuntimeRequest(message, {"protos": protos})
        token = _ASYNC_INVOCATION.set(invocation_id)
        _RUNNING[invocation_id] = name
        try:
            response = await self._events.invocation_request(request)
        finally:
            _ASYNC_INVOCATION.reset(token)
            _RUNNING.pop(invocation_id, None)
        return response, self._bound.take(invocation_id)

    def close(self) -> None:
        """Stop the runtime's thread pool (running functions finish first), then the arguments monitor."""
        self._threadpool.stop_threadpool_executor()
        self._bound.close()
