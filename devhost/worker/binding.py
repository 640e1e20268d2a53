"""Binding in the in-process worker, by ``azure_functions_runtime``: the host's trigger data in FunctionRpc
(:mod:`devhost.rpc.trigger_data`) -> the function's arguments, through the runtime's own
``from_incoming_proto`` with the parameter's binding and type as the runtime's loader recorded them
(``FunctionInfo.input_types``), as the runtime's ``invocation_request`` does: ``func.ServiceBusMessage``
(one or a batch) with its trigger metadata, ``str``/``bytes`` bodies, the binding extension's SDK types
(deferred binding), ``func.HttpRequest``, ``func.TimerRequest``; and the runtime's settlement client (the
extension's ``ServiceBusMessageActions``, talking gRPC to the host) for the parameter that asks for it.
"""

from __future__ import annotations

from typing import Any

from devhost.rpc.protos import load as load_protos
from devhost.rpc.trigger_data import trigger_data
from devhost.worker.app_loader import FunctionSpec
from devhost.worker_protocol import InvocationInput


def bind_arguments(function: FunctionSpec, data: InvocationInput) -> dict[str, Any]:
    """The trigger (and Service Bus actions) arguments for one invocation; raises if they cannot be bound."""
    from azure_functions_runtime.bindings.meta import (
        from_incoming_proto,
        get_settlement_client,
        is_trigger_binding,
    )

    info = function.runtime
    trigger_arg = function.trigger_arg
    typed, metadata = trigger_data(data, function.name)
    type_info = info.input_types[trigger_arg]
    arguments = {
        trigger_arg: from_incoming_proto(
            type_info.binding_name,
            load_protos().ParameterBinding(name=trigger_arg, data=typed),
            pytype=type_info.pytype,
            trigger_metadata=metadata if is_trigger_binding(type_info.binding_name) else None,
            function_name=info.name,
            is_deferred_binding=type_info.deferred_bindings_enabled,
        )
    }
    if info.settlement_client_arg is not None:
        arguments[info.settlement_client_arg] = get_settlement_client()
    return arguments
