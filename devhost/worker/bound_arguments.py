"""The classes of the arguments ``azure_functions_runtime`` binds for each invocation, which devhost's
invocation log records: observed with ``sys.monitoring`` (PEP 669), without touching the runtime.

The runtime calls every function through one of two public helpers of
``azure_functions_runtime.utils.executor`` (the module devhost already takes ``invocation_id_cv`` from):
``execute_async(function, args)`` for a coroutine function, awaited on the loop, and
``run_sync_func(invocation_id, context, func, params)`` for a plain one, on the runtime's thread pool. Their
arguments are exactly what the runtime bound, passed as ``function(**args)`` (azure-functions-runtime 1.3.0,
``handle_event.invocation_request``: ``execute_async(fi.func, args)`` or ``run_in_executor(threadpool,
run_sync_func, invocation_id, fi_context, fi.func, args)``). A ``PY_START`` event local to
these two code objects (no global event, no tracing: every other code runs uninstrumented) reads that
dictionary from the helper's frame as the call starts.

Why not the user functions' own frames: the only public way to them, the app's
``FunctionApp.get_functions()``, raises on a second call (azure-functions 2.3.0 keeps the names it
validated in ``functions_bindings`` and takes them for duplicates), and the runtime already made the first.
A user function's frame would also show a decorator's ``*args, **kwargs`` rather than the bound names.
"""

from __future__ import annotations

import contextvars
import inspect
import sys
from collections.abc import Container
from types import CodeType
from typing import Any

BoundArguments = tuple[tuple[str, str], ...]  # parameter -> the bound value's class ("module.QualName")

TOOL_NAME = "devhost.BoundArguments"
# sys.monitoring predefines ids 0-2 and 5 for debuggers, coverage, profilers and optimizers
# (https://docs.python.org/3/library/sys.monitoring.html#tool-identifiers): devhost takes a free other one.
_TOOL_IDS = (3, 4)
_ASYNC_PARAMETERS = ("function", "args")
_SYNC_PARAMETERS = ("invocation_id", "context", "func", "params")


def _class_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _bound_classes(arguments: dict[str, Any]) -> BoundArguments:
    import azure.functions as func

    # A func.Context is the host's, not a binding (the runtime's own Context class is recorded, as before).
    return tuple(
        (name, _class_name(value)) for name, value in arguments.items() if not isinstance(value, func.Context)
    )


def _code_of(helper: Any, parameters: tuple[str, ...]) -> CodeType:
    """The helper's code object, once its parameters are checked to be the ones read from its frame."""
    found = tuple(inspect.signature(helper).parameters)
    if found != parameters:
        raise RuntimeError(
            f"azure_functions_runtime's {helper.__qualname__} takes {found}, not {parameters}: devhost "
            "cannot read the arguments it binds (devhost.worker.bound_arguments needs updating)"
        )
    code: CodeType = helper.__code__
    return code


class BoundArgumentsMonitor:
    """Notes the classes of the arguments the runtime binds, per invocation, while it is open."""

    def __init__(self, async_invocation: contextvars.ContextVar[str | None], running: Container[str]) -> None:
        """``async_invocation``: the id of the invocation a coroutine function runs for (set around the
        runtime's ``invocation_request``); ``running``: the ids of the invocations running now (a note for
        any other is dropped, so nothing is left behind)."""
        from azure_functions_runtime.utils import executor

        self._async_invocation = async_invocation
        self._running = running
        self._bound: dict[str, BoundArguments] = {}
        self._async_code = _code_of(executor.execute_async, _ASYNC_PARAMETERS)
        self._sync_code = _code_of(executor.run_sync_func, _SYNC_PARAMETERS)
        monitoring = sys.monitoring
        free = [tool for tool in _TOOL_IDS if monitoring.get_tool(tool) is None]
        if not free:
            raise RuntimeError(f"sys.monitoring has no free tool id among {_TOOL_IDS} for {TOOL_NAME}")
        self.tool = free[0]
        monitoring.use_tool_id(self.tool, TOOL_NAME)
        monitoring.register_callback(self.tool, monitoring.events.PY_START, self._started)
        for code in self.codes:
            monitoring.set_local_events(self.tool, code, monitoring.events.PY_START)
        self._open = True

    @property
    def codes(self) -> tuple[CodeType, CodeType]:
        """The only code objects the monitor has events on: the runtime's two call helpers."""
        return (self._async_code, self._sync_code)

    def _started(self, code: CodeType, instruction_offset: int) -> None:
        # Called by the interpreter as one of the helpers starts (a plain function's on its pool thread, a
        # coroutine function's on the loop, in the invocation's task): the frame one up is the helper's.
        frame = inspect.currentframe()
        try:
            helper = None if frame is None else frame.f_back
            if helper is None or helper.f_code is not code:
                return
            arguments = helper.f_locals
            if code is self._sync_code:
                invocation_id, bound = arguments["invocation_id"], arguments["params"]
            else:
                invocation_id, bound = self._async_invocation.get(), arguments["args"]
            if invocation_id in self._running and isinstance(bound, dict):
                # The runtime calls the function once per invocation: a second call is not the binding.
                self._bound.setdefault(invocation_id, _bound_classes(bound))
        finally:
            del frame  # the frame would otherwise hold itself (inspect's advice)

    def take(self, invocation_id: str) -> BoundArguments:
        """The classes bound for ``invocation_id`` (nothing when the runtime did not call the function),
        forgotten here."""
        return self._bound.pop(invocation_id, ())

    def close(self) -> None:
        """Remove the events and the callback and free the tool id."""
        if not self._open:
            return
        self._open = False
        monitoring = sys.monitoring
        for code in self.codes:
            monitoring.set_local_events(self.tool, code, 0)
        monitoring.register_callback(self.tool, monitoring.events.PY_START, None)
        monitoring.free_tool_id(self.tool)
