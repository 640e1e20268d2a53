"""The host's index of the app, built from what the worker's runtime indexed (``RpcFunctionMetadata``).

Since worker indexing (the v2 programming model), the Functions host learns the app from the worker: it
sends ``FunctionsMetadataRequest`` and validates each function's ``raw_bindings`` (JSON) as
``WorkerFunctionMetadataProvider.ValidateMetadata`` and ``ValidateBindings`` do (azure-functions-host,
``src/WebJobs.Script/Host/WorkerFunctionMetadataProvider.cs``, ``Utility.ValidateName`` and
``ValidateBinding``): a valid function name, binding names, ``$return`` only as an output, no two bindings
of one name, a trigger. It then binds each trigger through its extension with the binding's properties,
``%Name%`` app-setting expressions resolved, and with the parameter type the binding's ``dataType`` and
``cardinality`` request (``GeneralScriptBindingProvider.GetRequestedType``): ``ParameterBindingData``
(``model_binding_data``) when the worker marked the binding ``SupportsDeferredBinding`` (the binding
extension's SDK types), ``byte[]`` for ``binary``, and otherwise ``string`` (``DataType`` ``string``, or
none: ``JobHostMetadataProvider.GetDefaultType``'s default for a trigger).

Where the host would log a function error and run the others, devhost refuses to start with the same
``The '<name>' function is in error: ...`` line. It also refuses what it does not host (triggers other
than Service Bus, timer and HTTP; output bindings: Busbar talks to Service Bus through the SDK).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from devhost.bindings import resolve_expression
from devhost.channel.protocol import FunctionMetadata, PayloadKind, ServiceBusShape

SERVICE_BUS_TRIGGER = "serviceBusTrigger"
HTTP_TRIGGER = "httpTrigger"
SUPPORTED_TRIGGERS = (SERVICE_BUS_TRIGGER, "timerTrigger", HTTP_TRIGGER)
RETURN_BINDING = "$return"
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
# Utility.FunctionNameValidationRegex and BindingNameValidationRegex.
_FUNCTION_NAME = re.compile(r"^[a-z][a-z0-9_\-]{0,127}$(?<!^host$)", re.IGNORECASE)
_BINDING_NAME = re.compile(r"^([a-zA-Z][a-zA-Z0-9]{0,127}|\$return)$")


class AppLoadError(RuntimeError):
    """The app cannot be indexed, or declares something the host (or devhost) refuses to run."""


class _FunctionError(Exception):
    """One function's metadata fails the host's validation (the host's message)."""


def _bindings(function_name: str, raw_bindings: Sequence[str]) -> list[dict[str, Any]]:
    """The raw bindings as the host reads and validates them (``ValidateBindings``)."""
    if not _FUNCTION_NAME.match(function_name):
        raise _FunctionError(f"'{function_name}' is not a valid function name.")
    bindings: list[dict[str, Any]] = []
    names: set[str] = set()
    for raw in raw_bindings:
        binding = json.loads(raw)
        name = binding.get("name")
        if not isinstance(name, str) or not _BINDING_NAME.match(name):
            raise _FunctionError(
                f"The binding name {name} is invalid. Please assign a valid name to the binding."
            )
        if name.lower() == RETURN_BINDING and str(binding.get("direction", "")).lower() != "out":
            raise _FunctionError(f"{RETURN_BINDING} bindings must specify a direction of 'out'.")
        if name.lower() in names:
            raise _FunctionError(
                f"Multiple bindings with name '{name}' discovered. Binding names must be unique."
            )
        names.add(name.lower())
        bindings.append(binding)
    if not bindings:
        raise _FunctionError("At least one binding must be declared.")
    if not any(str(b.get("type", "")).lower().endswith("trigger") for b in bindings):
        raise _FunctionError("No trigger binding specified. A function must have a trigger input binding.")
    return bindings


def _payload(trigger: Mapping[str, Any]) -> PayloadKind:
    """The trigger parameter's type the host requests (``GetRequestedType``), as the data it sends."""
    properties = trigger.get("properties") or {}
    if isinstance(properties, Mapping) and properties.get("SupportsDeferredBinding") is True:
        return "sdk"
    data_type = str(trigger.get("dataType") or "").lower()
    if data_type in ("binary", "stream"):
        return "bytes"
    if data_type != "string" and str(trigger.get("cardinality") or "ONE").upper() == "MANY":
        # No data type is ``object``; for a batch it stays ``object[]`` (``GetDefaultType`` turns only a
        # plain ``object`` into ``string``), which webjobs-sdk binds element by element through Json.NET.
        return "object"
    return "str"


def _service_bus(name: str, trigger: Mapping[str, Any]) -> ServiceBusShape:
    queue = trigger.get("queueName")
    topic = trigger.get("topicName")
    subscription = trigger.get("subscriptionName")
    if not queue and not (topic and subscription):
        raise AppLoadError(
            f"function '{name}': a Service Bus trigger needs queueName or topicName+subscriptionName"
        )
    auto_complete = trigger.get("autoCompleteMessages")
    return ServiceBusShape(
        entity=str(queue) if queue else f"{topic}/Subscriptions/{subscription}",
        queue_name=str(queue) if queue else None,
        topic_name=None if queue else str(topic),
        subscription_name=None if queue else str(subscription),
        sessions=bool(trigger.get("isSessionsEnabled")),
        batch=str(trigger.get("cardinality") or "ONE").upper() == "MANY",
        auto_complete=None if auto_complete is None else bool(auto_complete),
        payload=_payload(trigger),
    )


def _resolved(binding: Mapping[str, Any], settings: Mapping[str, str], where: str) -> dict[str, Any]:
    return {
        key: resolve_expression(value, settings, where=f"{where} binding '{key}'")
        if isinstance(value, str)
        else value
        for key, value in binding.items()
    }


def describe_function(metadata: Any, settings: Mapping[str, str]) -> FunctionMetadata:
    """What the host knows of one function: its ``RpcFunctionMetadata`` (``name``, ``function_id``,
    ``raw_bindings``) validated and read as the host reads it. Raises AppLoadError, or BindingError for an
    app setting its trigger names that does not exist."""
    name = str(metadata.name)
    try:
        bindings = _bindings(name, list(metadata.raw_bindings))
    except (_FunctionError, ValueError) as exc:
        raise AppLoadError(f"The '{name}' function is in error: {exc}") from None
    unknown = [
        str(b.get("type")) for b in bindings if str(b.get("type", "")).lower() not in BUNDLE_BINDING_TYPES
    ]
    if unknown:
        raise AppLoadError(
            f"The '{name}' function is in error: The binding type(s) '{', '.join(unknown)}' were not "
            "found in the configured extension bundle. Please ensure the type is correct and the correct "
            "version of extension bundle is configured."
        )
    where = f"function '{name}'"
    triggers = [b for b in bindings if str(b.get("type", "")).lower().endswith("trigger")]
    if len(triggers) != 1:
        raise AppLoadError(f"{where} must have exactly one trigger, has {len(triggers)}")
    trigger_type = str(triggers[0]["type"])
    if trigger_type not in SUPPORTED_TRIGGERS:
        raise AppLoadError(
            f"{where}: trigger type '{trigger_type}' is not supported by devhost "
            f"(supported: {', '.join(SUPPORTED_TRIGGERS)})"
        )
    for binding in bindings:
        if binding is triggers[0] or (
            binding.get("type") == "http" and binding.get("name") == RETURN_BINDING
        ):
            continue
        raise AppLoadError(
            f"{where}: binding '{binding.get('name')}' of type '{binding.get('type')}' is not supported by "
            "devhost; Busbar talks to Service Bus through the azure-servicebus SDK, not output bindings"
        )
    trigger = _resolved(triggers[0], settings, where)
    return FunctionMetadata(
        name=name,
        function_id=str(metadata.function_id),
        trigger_type=trigger_type,
        trigger=trigger,
        trigger_arg=str(trigger["name"]),
        service_bus=_service_bus(name, trigger) if trigger_type == SERVICE_BUS_TRIGGER else None,
    )


def index_functions(metadata: Sequence[Any], settings: Mapping[str, str]) -> list[FunctionMetadata]:
    """The host's functions from the worker's ``function_metadata_results``, in the worker's order."""
    functions = [describe_function(entry, settings) for entry in metadata]
    seen: set[str] = set()
    for function in functions:
        if function.name.lower() in seen:
            raise AppLoadError(f"two functions are named '{function.name}'")
        seen.add(function.name.lower())
    return functions
