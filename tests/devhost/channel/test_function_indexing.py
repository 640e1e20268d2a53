"""The host reads its index from the worker's ``RpcFunctionMetadata`` as the Functions host does: its
validation of the raw bindings (``WorkerFunctionMetadataProvider.ValidateBindings``, ``Utility``), ``%Name%``
resolved, and the parameter type each trigger binding requests (``GetRequestedType``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devhost.bindings import BindingError
from devhost.channel.function_indexing import AppLoadError, index_functions
from devhost.channel.protos import load as load_protos


def _metadata(name: str, *bindings: dict[str, Any]) -> Any:
    return load_protos().RpcFunctionMetadata(
        name=name, function_id=f"{name}-id", raw_bindings=[json.dumps(b) for b in bindings]
    )


def _trigger(**fields: Any) -> dict[str, Any]:
    return {"direction": "IN", "type": "serviceBusTrigger", "name": "msg", "queueName": "q", **fields}


def test_a_trigger_is_read_from_its_raw_binding_with_app_settings_resolved() -> None:
    [function] = index_functions(
        [_metadata("work", _trigger(queueName="%QUEUE%", connection="Sb", cardinality="MANY"))],
        {"QUEUE": "orders"},
    )

    assert (function.name, function.function_id, function.trigger_arg) == ("work", "work-id", "msg")
    assert function.trigger["queueName"] == "orders" and function.trigger["connection"] == "Sb"
    assert function.service_bus is not None
    assert (function.service_bus.entity, function.service_bus.batch) == ("orders", True)


def test_an_app_setting_a_trigger_names_must_exist() -> None:
    with pytest.raises(BindingError, match="'%QUEUE%' does not resolve to a value"):
        index_functions([_metadata("work", _trigger(queueName="%QUEUE%"))], {})


@pytest.mark.parametrize(
    ("fields", "payload"),
    [
        ({}, "str"),  # no dataType: the trigger's default type, string
        ({"dataType": "STRING"}, "str"),
        ({"dataType": "BINARY"}, "bytes"),
        ({"properties": {"SupportsDeferredBinding": True}}, "sdk"),  # ParameterBindingData
        # A batch without a dataType requests object[] (GetDefaultType turns only a plain object into
        # string): each body goes through Json.NET.
        ({"cardinality": "MANY"}, "object"),
        ({"cardinality": "MANY", "dataType": "STRING"}, "str"),  # string[]
        ({"cardinality": "MANY", "dataType": "BINARY"}, "bytes"),  # byte[][]
        ({"cardinality": "MANY", "properties": {"SupportsDeferredBinding": True}}, "sdk"),
    ],
)
def test_the_host_sends_what_the_binding_requests(fields: dict[str, Any], payload: str) -> None:
    [function] = index_functions([_metadata("work", _trigger(**fields))], {})
    assert function.service_bus is not None and function.service_bus.payload == payload


@pytest.mark.parametrize(
    ("name", "bindings", "error"),
    [
        ("host", [_trigger()], "'host' is not a valid function name."),
        ("1st", [_trigger()], "'1st' is not a valid function name."),
        (
            "work",
            [_trigger(name="my_msg")],
            "The binding name my_msg is invalid. Please assign a valid name to the binding.",
        ),
        (
            "work",
            [_trigger(), {"direction": "IN", "type": "http", "name": "$return"}],
            "$return bindings must specify a direction of 'out'.",
        ),
        (
            "work",
            [_trigger(), {"direction": "IN", "type": "serviceBus", "name": "MSG", "queueName": "q"}],
            "Multiple bindings with name 'MSG' discovered. Binding names must be unique.",
        ),
        (
            "work",
            [{"direction": "IN", "type": "serviceBus", "name": "msg", "queueName": "q"}],
            "No trigger binding specified. A function must have a trigger input binding.",
        ),
    ],
)
def test_metadata_the_host_rejects_refuses_start_up_with_its_message(
    name: str, bindings: list[dict[str, Any]], error: str
) -> None:
    with pytest.raises(AppLoadError) as refused:
        index_functions([_metadata(name, *bindings)], {})
    assert str(refused.value) == f"The '{name}' function is in error: {error}"
