"""Invocations run by ``azure_functions_runtime`` itself: the host's ``InvocationRequest`` goes to its
``invocation_request`` entry point, which binds the arguments, makes the ``func.Context``, runs the function
(a coroutine on the loop, a plain function on the runtime's thread pool, as in Azure) and answers the
``InvocationResponse``, exactly as Azure's Python 3.13 worker does. host.json's ``functionTimeout`` is the
host's (``devhost.channel.process_worker``), as in Azure.

Only in devhost's worker process, after the runtime's own ``worker_init_request`` imported and indexed the
app into its registry (``devhost.worker.runtime_driver``): the runtime keeps the functions in a module-global
registry (and its thread pool in a module global), so it must own the process, as it owns the worker in
Azure. The one thing devhost adds is a thin wrapper around each indexed function that notes the classes of
the arguments the runtime bound, which devhost's invocation log records: each function is registered again
through the registry's own method with everything the runtime derived for it, only its callable wrapped.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Sequence
from typing import Any

import azure.functions as func
from azure_functions_runtime.utils.executor import invocation_id_cv

from devhost.channel.protos import load as load_protos
from devhost.worker.runtime_driver import RuntimeRequest

BoundArguments = tuple[tuple[str, str], ...]  # parameter -> the bound value's class ("module.QualName")
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


def _class_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


class RuntimeInvocations:
    """The worker's invocations, each through the runtime's ``invocation_request``."""

    def __init__(self, indexed: Sequence[Any]) -> None:
        """``indexed``: the runtime's ``RpcFunctionMetadata`` of each function it indexed."""
        from azure_functions_runtime import handle_event
        from azure_functions_runtime.utils import threadpool

        self._events = handle_event
        self._threadpool = threadpool
        self.protos = load_protos()
        self._bound: dict[str, BoundArguments] = {}
        # The proxy worker starts the runtime's pool (PYTHON_THREADPOOL_THREAD_COUNT, read from the
        # environment the host gave the worker process).
        threadpool.start_threadpool_executor()
        self._names: dict[str, str] = {}  # function id -> name
        registry = handle_event._functions
        for metadata in indexed:
            info = registry.get_function(metadata.function_id)
            if info is None:
                raise LookupError(f"the runtime did not register function '{metadata.name}'")
            # Registered again through the registry's own method, with what the runtime derived for it
            # unchanged (has_return covers explicit and implicit returns alike) and only the callable wrapped.
            registry.add_func_to_registry_and_return_funcinfo(
                self._noting_arguments(info.func, is_async=info.is_async),
                function_name=info.name,
                function_id=info.function_id,
                directory=info.directory,
                requires_context=info.requires_context,
                has_explicit_return=info.has_return,
                has_implicit_return=False,
                deferred_bindings_enabled=info.deferred_bindings_enabled,
                settlement_client_arg=info.settlement_client_arg,
                input_types=dict(info.input_types),
                output_types=dict(info.output_types),
                return_type=info.return_type,
            )
            again = registry.get_function(info.function_id)
            if again is None or again._replace(func=info.func) != info:
                raise RuntimeError(f"the runtime registered '{info.name}' differently the second time")
            self._names[info.function_id] = info.name

    def _note(self, invocation_id: str | None, arguments: dict[str, Any]) -> None:
        if invocation_id is not None:
            bound = tuple(
                (name, _class_name(value))
                for name, value in arguments.items()
                if not isinstance(value, func.Context)
            )
            self._bound[invocation_id] = bound

    def _noting_arguments(self, function: Callable[..., Any], *, is_async: bool) -> Callable[..., Any]:
        if is_async:

            @functools.wraps(function)
            async def run_async(**arguments: Any) -> Any:
                self._note(_ASYNC_INVOCATION.get(), arguments)
                return await function(**arguments)

            return run_async

        @functools.wraps(function)
        def run(**arguments: Any) -> Any:
            self._note(invocation_id_cv.get(), arguments)
            return function(**arguments)

        return run

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
        return response, self._bound.pop(invocation_id, ())

    def close(self) -> None:
        """Stop the runtime's thread pool (running functions finish first)."""
        self._threadpool.stop_threadpool_executor()
