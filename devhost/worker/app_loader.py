"""Import a v2-model ``function_app.py`` in devhost's own process (the in-process worker) and index it with
``azure_functions_runtime``'s loader.

The worker process leaves all of this to the runtime's ``worker_init_request``; here the runtime may not
own the process (it keeps one app in module globals), so devhost imports the script itself -- under a fresh
module name each time, so several hosts in one process each get their own ``FunctionApp`` -- and hands its
functions to the runtime's loader (``devhost.rpc.load_checks``), which yields the same ``FunctionInfo``
(how each parameter binds) and ``RpcFunctionMetadata`` (what the host reads) as in the worker process.
Failures read as there: ``indexing <script> failed: <Type>: <message>``.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import azure.functions as func

from devhost.function_indexing import AppLoadError
from devhost.rpc.load_checks import RuntimeLoadError, runtime_functions

__all__ = ["AppLoadError", "FunctionSpec", "LoadedApp", "import_script", "load_app"]


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """One indexed function: how to call it, and how the runtime binds its parameters."""

    name: str
    trigger_type: str
    handler: Callable[..., Any]
    trigger_arg: str
    parameters: Mapping[str, inspect.Parameter] = field(default_factory=dict)
    runtime: Any = None  # azure_functions_runtime's FunctionInfo: how the runtime binds its parameters

    @property
    def is_async(self) -> bool:
        """Whether the handler is a coroutine function (run on the loop, not in a thread)."""
        return inspect.iscoroutinefunction(self.handler)

    @property
    def context_arg(self) -> str | None:
        """The parameter that receives ``func.Context`` (named ``context`` or annotated so)."""
        for name, parameter in self.parameters.items():
            annotation = parameter.annotation
            if name == "context" or (inspect.isclass(annotation) and issubclass(annotation, func.Context)):
                return name
        return None


@dataclass(frozen=True, slots=True)
class LoadedApp:
    """An imported and indexed app: its functions, and the runtime's ``RpcFunctionMetadata`` of each."""

    functions: list[FunctionSpec]
    metadata: list[Any]


def import_script(path: Path) -> Any:
    """Import ``path`` as a new, uniquely named module; its folder goes on ``sys.path`` like the worker's."""
    path = path.resolve()
    if not path.is_file():
        raise AppLoadError(f"function app script not found: {path}")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_name = f"_devhost_app_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise AppLoadError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise AppLoadError(f"indexing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _function_app(module: Any, path: Path) -> func.FunctionRegister:
    """The module's one ``FunctionRegister``, as the runtime's ``index_function_app`` finds it."""
    apps = [value for value in vars(module).values() if isinstance(value, func.FunctionRegister)]
    if len(apps) > 1:
        raise AppLoadError(
            f"indexing {path} failed: ValueError: More than one {type(apps[0]).__name__} or other top level "
            "function app instances are defined."
        )
    if not apps:
        raise AppLoadError(
            f"indexing {path} failed: ValueError: Could not find top level function app instances in "
            f"{path.name}."
        )
    return apps[0]


def _spec(function: Any, info: Any) -> FunctionSpec:
    trigger = function.get_trigger()
    handler = function.get_user_function()
    return FunctionSpec(
        name=function.get_function_name(),
        trigger_type=str(trigger.type),
        handler=handler,
        trigger_arg=str(trigger.name),
        parameters=dict(inspect.signature(handler).parameters),
        runtime=info,
    )


def load_app(path: Path) -> LoadedApp:
    """Import ``path`` and index its functions with the runtime's loader (AppLoadError if it cannot)."""
    path = path.resolve()
    module = import_script(path)
    app = _function_app(module, path)
    try:
        functions = app.get_functions()  # the library validates (duplicate names, missing triggers) here
        index = runtime_functions(functions, path.parent)
    except RuntimeLoadError as exc:
        raise AppLoadError(f"indexing {path} failed: {exc}") from exc
    except Exception as exc:
        raise AppLoadError(f"indexing {path} failed: {type(exc).__name__}: {exc}") from exc
    specs = [_spec(function, index.functions[str(function.get_function_name())]) for function in functions]
    return LoadedApp(specs, index.metadata)
