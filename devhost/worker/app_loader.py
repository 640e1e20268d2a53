"""Import a v2-model ``function_app.py`` and describe its functions the way the worker indexes them.

Every load imports the script under a fresh module name, so several hosts in one process each get their
own ``FunctionApp`` (``function_app`` in ``sys.modules`` would otherwise hand every host the first one).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import azure.functions as func

from devhost.bindings import resolve_expression
from devhost.rpc.load_checks import RuntimeLoadError, runtime_functions

SUPPORTED_TRIGGERS = ("serviceBusTrigger", "timerTrigger", "httpTrigger")
# Binding types the Functions host's extension bundle (v4) registers; any other type stops the host with
# "The binding type(s) ... were not found in the configured extension bundle".
BUNDLE_BINDING_TYPES = frozenset(
    t.lower()
    for t in (
        *("http", "httpTrigger", "timerTrigger", "serviceBus", "serviceBusTrigger", "queue", "queueTrigger"),
        *("blob", "blobTrigger", "table", "eventHub", "eventHubTrigger", "eventGrid", "eventGridTrigger"),
        *("cosmosDB", "cosmosDBTrigger", "signalR", "signalRTrigger", "signalRConnectionInfo", "sendGrid"),
        *("twilioSms", "durableClient", "orchestrationTrigger", "activityTrigger", "entityTrigger"),
        *("kafka", "kafkaTrigger", "rabbitMQ", "rabbitMQTrigger", "sql", "sqlTrigger", "mysql"),
        *("mysqlTrigger", "webPubSub", "webPubSubTrigger", "webPubSubConnection", "webPubSubContext"),
    )
)


class AppLoadError(RuntimeError):
    """The script cannot be imported or declares something devhost cannot host."""


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """One indexed function: its trigger binding (``%expr%`` resolved) and how to call it."""

    name: str
    trigger_type: str
    trigger: Mapping[str, Any]
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
        raise AppLoadError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def find_function_app(module: Any, path: Path) -> func.FunctionApp:
    """The module's single ``FunctionApp`` (the worker indexes the first FunctionRegister it finds)."""
    apps = [value for value in vars(module).values() if isinstance(value, func.FunctionApp)]
    if not apps:
        raise AppLoadError(f"{path} defines no azure.functions.FunctionApp at module level")
    return apps[0]


def _resolved(binding: Mapping[str, Any], settings: Mapping[str, str], where: str) -> dict[str, Any]:
    return {
        key: resolve_expression(value, settings, where=f"{where} binding '{key}'")
        if isinstance(value, str)
        else value
        for key, value in binding.items()
    }


def describe_function(function: Any, settings: Mapping[str, str]) -> FunctionSpec:
    """The :class:`FunctionSpec` of one ``azure.functions`` Function object."""
    name: str = function.get_function_name()
    where = f"function '{name}'"
    bindings = [binding.get_dict_repr() for binding in function.get_bindings()]
    triggers = [b for b in bindings if str(b.get("type", "")).endswith("Trigger")]
    if len(triggers) != 1:
        raise AppLoadError(f"{where} must have exactly one trigger, has {len(triggers)}")
    unknown = [
        str(b.get("type")) for b in bindings if str(b.get("type", "")).lower() not in BUNDLE_BINDING_TYPES
    ]
    if unknown:
        raise AppLoadError(
            f"The '{name}' function is in error: The binding type(s) '{', '.join(unknown)}' were not "
            "found in the configured extension bundle. Please ensure the type is correct and the correct "
            "version of extension bundle is configured."
        )
    trigger = _resolved(triggers[0], settings, where)
    if trigger["type"] not in SUPPORTED_TRIGGERS:
        raise AppLoadError(
            f"{where}: trigger type '{trigger['type']}' is not supported by devhost "
            f"(supported: {', '.join(SUPPORTED_TRIGGERS)})"
        )
    for binding in bindings:
        if binding is triggers[0] or (binding.get("type") == "http" and binding.get("name") == "$return"):
            continue
        raise AppLoadError(
            f"{where}: binding '{binding.get('name')}' of type '{binding.get('type')}' is not supported by "
            "devhost; Busbar talks to Service Bus through the azure-servicebus SDK, not output bindings"
        )
    handler = function.get_user_function()
    parameters = dict(inspect.signature(handler).parameters)
    trigger_arg = str(trigger["name"])
    if trigger_arg not in parameters:
        raise AppLoadError(f"{where}: the handler has no parameter '{trigger_arg}' for its trigger")
    return FunctionSpec(
        name=name,
        trigger_type=str(trigger["type"]),
        trigger=trigger,
        handler=handler,
        trigger_arg=trigger_arg,
        parameters=parameters,
    )


def load_functions(path: Path, settings: Mapping[str, str]) -> list[FunctionSpec]:
    """Import ``path`` and index its functions; names must be unique, as in the host."""
    module = import_script(path)
    app = find_function_app(module, path)
    try:
        functions = app.get_functions()
    except Exception as exc:  # the library validates (duplicate names, missing triggers) here
        raise AppLoadError(f"indexing {path} failed: {exc}") from exc
    try:
        infos = runtime_functions(functions, path.parent)
    except RuntimeLoadError as exc:
        raise AppLoadError(f"indexing {path} failed: {exc}") from exc
    specs = [
        replace(spec, runtime=infos[spec.name])
        for spec in (describe_function(function, settings) for function in functions)
    ]
    seen: set[str] = set()
    for spec in specs:
        if spec.name.lower() in seen:
            raise AppLoadError(f"{path}: two functions are named '{spec.name}'")
        seen.add(spec.name.lower())
    return specs
