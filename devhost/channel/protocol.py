"""What the host side knows of functions and invocations, at the boundary with the worker.

In Azure the Functions host (.NET) and the Python worker are two processes: the host indexes nothing of the
app itself, it asks the worker (and reads its answer into ``FunctionMetadata``:
``devhost.channel.function_indexing``), turns each trigger into invocation data (``InvocationRequest``) and
gets back an outcome (``InvocationOutcome``). devhost draws the same line: the triggers and the HTTP front end
hand the worker channel (``devhost.channel.process_worker.ProcessWorker``) these values, which the worker
process gets as FunctionRpc messages (``devhost.channel.invocation_rpc``). Every type here is a frozen
dataclass of plain values (str, bytes, numbers, datetimes, dicts and tuples of them), picklable and free of
SDK and ``azure.functions`` objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

# What the host sends for a Service Bus trigger, by the parameter type its binding requests: the body as a
# string, the body's bytes (``dataType`` ``binary``), the binding extension's model binding data (SDK
# types, deferred binding), or, for a batch without a ``dataType`` (``object[]``), each body as Json.NET read
# and wrote it (:mod:`devhost.dotnet.json_net`).
PayloadKind = Literal["str", "bytes", "sdk", "object"]


@dataclass(frozen=True, slots=True)
class ServiceBusShape:
    """How a Service Bus function wants its messages, read from its trigger binding as the host reads it."""

    entity: str
    queue_name: str | None
    topic_name: str | None
    subscription_name: str | None
    sessions: bool
    batch: bool
    auto_complete: bool | None  # the binding's autoCompleteMessages; None: host.json's default
    payload: PayloadKind


@dataclass(frozen=True, slots=True)
class FunctionMetadata:
    """What the host needs to know about one indexed function."""

    name: str
    function_id: str  # the worker's id for it (``RpcFunctionMetadata.function_id``)
    trigger_type: str
    trigger: Mapping[str, Any]  # the trigger's raw binding, ``%expr%`` resolved
    trigger_arg: str
    service_bus: ServiceBusShape | None = None


@dataclass(frozen=True, slots=True)
class ServiceBusMessageData:
    """One received message as the host sends it: the body, and the fields and application properties
    read from the SDK message for its trigger metadata (trigger-metadata names, typed values)."""

    body: bytes
    fields: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ServiceBusInput:
    """A Service Bus trigger: ``messages`` (``str``/``bytes`` payloads) or ``binding_data`` (the
    ``model_binding_data`` contents the host's extension sends for SDK types), one entry per message."""

    payload: PayloadKind
    batch: bool
    messages: tuple[ServiceBusMessageData, ...] = ()
    binding_data: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class ManualServiceBusInput:
    """``POST /admin/functions/{name}`` on a Service Bus function: a body no broker holds."""

    body: bytes
    message_id: str
    enqueued_time_utc: datetime
    batch: bool


@dataclass(frozen=True, slots=True)
class HttpInput:
    """An HTTP request for an HTTP-triggered function."""

    method: str
    url: str
    headers: Mapping[str, str]
    params: Mapping[str, str]
    route_params: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class HttpOutput:
    """The response an HTTP function's return value makes; ``content_type`` None: no Content-Type."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class TimerInput:
    """What a timer function's ``TimerRequest`` holds."""

    past_due: bool
    schedule_status: Mapping[str, Any]
    schedule: Mapping[str, Any]


InvocationInput = ServiceBusInput | ManualServiceBusInput | HttpInput | TimerInput


@dataclass(frozen=True, slots=True)
class InvocationRequest:
    """Run ``function_name`` once with ``input``."""

    function_name: str
    invocation_id: str
    input: InvocationInput


@dataclass(frozen=True, slots=True)
class InvocationOutcome:
    """How an invocation ended. ``bound``: parameter -> the bound value's class (``module.QualName``);
    ``http``: a succeeded HTTP function's response."""

    succeeded: bool
    error: str | None = None  # the exception's message
    error_type: str | None = None  # the exception's class name
    bound: tuple[tuple[str, str], ...] = ()
    http: HttpOutput | None = None

    @property
    def error_detail(self) -> str | None:
        """``Type: message``, as the invocation log writes a failure."""
        return None if self.succeeded else f"{self.error_type}: {self.error}"
