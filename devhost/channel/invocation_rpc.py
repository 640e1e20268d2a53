"""An invocation in FunctionRpc messages, the host's side: the ``InvocationRequest`` the Functions host sends
for a trigger's data, how it reads the worker's ``InvocationResponse``, and ``InvocationCancel`` /
``WorkerTerminate``.

The request carries the function's id (from the worker's metadata), the trigger parameter's ``TypedData``
and the trigger metadata, built by the host's conversion rules (:mod:`devhost.channel.trigger_data`). The
response's ``StatusResult`` says whether the function succeeded; a failure's ``RpcException`` message is the
runtime's ``<Type>: <message>``; an HTTP function's response is its ``$return`` value
(:mod:`devhost.channel.http_return`).
"""

from __future__ import annotations

from typing import Any

from devhost.channel.http_return import http_output_of
from devhost.channel.protocol import FunctionMetadata, InvocationOutcome, InvocationRequest
from devhost.channel.protos import load as load_protos
from devhost.channel.trigger_data import TriggerBindingError, write_trigger_data

HTTP_TRIGGER = "httpTrigger"


def invocation_message(function: FunctionMetadata, request: InvocationRequest) -> Any:
    """The ``StreamingMessage`` that asks the worker to run ``request`` (built in place: no part of it is
    made apart and copied in)."""
    message = load_protos().StreamingMessage(request_id=request.invocation_id)
    invocation = message.invocation_request
    invocation.invocation_id = request.invocation_id
    invocation.function_id = function.function_id
    try:
        write_trigger_data(invocation, request.input, function.name, function.trigger_arg)
    except TriggerBindingError as exc:
        # As webjobs-sdk's FunctionExecutor wraps a binding failure: the invocation fails, naming the
        # parameter.
        raise TriggerBindingError(f"Exception binding parameter '{function.trigger_arg}': {exc}") from None
    return message


def invocation_outcome(
    function: FunctionMetadata, response: Any, bound: tuple[tuple[str, str], ...] = ()
) -> InvocationOutcome:
    """How the invocation ended, from the worker's ``InvocationResponse`` (and the argument classes the
    worker reported for it)."""
    protos = load_protos()
    result = response.result
    if result.status != protos.StatusResult.Success:
        if result.status == protos.StatusResult.Cancelled:
            return InvocationOutcome(False, "the invocation was cancelled", "TaskCanceledException", bound)
        kind, _, message = result.exception.message.partition(": ")  # serialize_exception's form
        return InvocationOutcome(False, message, kind, bound)
    if function.trigger_type != HTTP_TRIGGER:
        return InvocationOutcome(True, bound=bound)
    return InvocationOutcome(True, bound=bound, http=http_output_of(response.return_value))


def cancel_message(invocation_id: str) -> Any:
    """``InvocationCancel``: the host gave up on ``invocation_id`` (its drain time passed)."""
    protos = load_protos()
    return protos.StreamingMessage(invocation_cancel=protos.InvocationCancel(invocation_id=invocation_id))


def terminate_message() -> Any:
    """``WorkerTerminate``: the worker ends once its running invocations have finished."""
    protos = load_protos()
    return protos.StreamingMessage(worker_terminate=protos.WorkerTerminate())
