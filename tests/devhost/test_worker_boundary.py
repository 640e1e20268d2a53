"""The worker boundary: what crosses it is plain and picklable, and a function gets through the channel the
objects it got before the boundary existed (Service Bus ``func`` messages single and batch, the binding
extension's SDK types, HTTP requests and responses, timer requests)."""

from __future__ import annotations

import asyncio
import io
import pickle
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from devhost.in_process_worker import InProcessWorker, across, start_worker
from devhost.message_reading import message_data
from devhost.model_binding_data import model_binding_content
from devhost.settlement import ensure_settlement_server
from devhost.worker_channel import WorkerOptions
from devhost.worker_protocol import (
    FunctionMetadata,
    HttpInput,
    HttpOutput,
    InvocationInput,
    InvocationOutcome,
    InvocationRequest,
    ManualServiceBusInput,
    ServiceBusInput,
    ServiceBusMessageData,
    ServiceBusShape,
    TimerInput,
)
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import send

APP = """
import typing

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
SEEN = {}


@app.service_bus_queue_trigger(arg_name="msg", queue_name="%SINGLE%", connection="Sb")
def single(msg: func.ServiceBusMessage, context: func.Context) -> None:
    SEEN["single"] = (msg, context)


@app.service_bus_queue_trigger(arg_name="msgs", queue_name="%BATCH%", connection="Sb", cardinality="many")
def batch(msgs: typing.List[func.ServiceBusMessage]) -> None:
    SEEN["batch"] = msgs


@app.service_bus_queue_trigger(arg_name="message", queue_name="%SDK%", connection="Sb")
def sdk(message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions) -> None:
    SEEN["sdk"] = message


@app.service_bus_queue_trigger(arg_name="body", queue_name="%SDK%", connection="Sb")
def text(body: str) -> None:
    SEEN["text"] = body


@app.route(route="echo/{name}", methods=["POST"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    SEEN["echo"] = req
    return func.HttpResponse(
        f"{req.route_params['name']}:{req.get_body().decode()}:{req.params.get('q')}",
        status_code=201,
        headers={"X-Seen": req.headers.get("x-in", "")},
        mimetype="text/plain",
        charset="utf-8",
    )


# Unannotated: azure-functions-runtime refuses to load an HTTP function annotated to return anything but an
# HTTP response (or str).
@app.route(route="document")
def document(req: func.HttpRequest):
    return {"a": 1}


@app.route(route="nothing")
def nothing(req: func.HttpRequest):
    return None


@app.route(route="raw")
def raw(req: func.HttpRequest):
    return b"raw"


@app.route(route="text")
def text_reply(req: func.HttpRequest):
    return "plain"


@app.route(route="boom")
async def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise KeyError("nope")


@app.timer_trigger(arg_name="timer", schedule="0 */5 * * * *")
def tick(timer: func.TimerRequest) -> None:
    SEEN["tick"] = timer
"""

FUNC_MESSAGE = "azure.functions.servicebus.ServiceBusMessage"
SDK_MESSAGE = "azure.servicebus._common.message.ServiceBusReceivedMessage"
EXTENSION_ACTIONS = (
    "azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions.ServiceBusMessageActions"
)


@dataclass
class Worker:
    channel: InProcessWorker
    app: ModuleType  # the app module as the worker imported it (its SEEN dict)
    queues: dict[str, str]

    def invoke(self, name: str, data: InvocationInput) -> InvocationOutcome:
        request = InvocationRequest(name, str(uuid.uuid4()), data)
        return asyncio.run(self.channel.invoke(request))

    @property
    def seen(self) -> dict[str, Any]:
        seen: dict[str, Any] = self.app.SEEN
        return seen


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, shared_emulator: EmulatorHandle) -> Iterator[Worker]:
    path = tmp_path_factory.mktemp("boundary") / "function_app.py"
    path.write_text(textwrap.dedent(APP), encoding="utf-8")
    queues = {"SINGLE": "", "BATCH": "", "SDK": ""}
    queues = {name: shared_emulator.create_queue(lock_duration=timedelta(seconds=30)) for name in queues}
    channel = start_worker(WorkerOptions(path, {"Sb": shared_emulator.connection_string, **queues}))
    app = next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(path.resolve()))
    try:
        yield Worker(channel, app, queues)
    finally:
        asyncio.run(channel.close())


def _received(emulator: EmulatorHandle, queue: str, *messages: ServiceBusMessage) -> list[Any]:
    """Send ``messages`` and receive them locked (they are never settled: the queue is this module's)."""
    send(emulator.connection_string, queue, *messages)
    received: list[ServiceBusReceivedMessage] = []
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        while len(received) < len(messages):
            received.extend(receiver.receive_messages(len(messages) - len(received), max_wait_time=5))
    return received


# ------------------------------------------------------------------------------------------- pickling

SHAPE = ServiceBusShape("q", "q", None, None, False, True, None, "str", "actions")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
MESSAGE = ServiceBusMessageData(
    b"body", {"DeliveryCount": 1, "EnqueuedTimeUtc": NOW, "TimeToLive": timedelta(minutes=5)}, {"k": "v"}
)
VALUES: list[Any] = [
    FunctionMetadata(
        "f",
        "f-id",
        "serviceBusTrigger",
        {"type": "serviceBusTrigger", "name": "m"},
        "m",
        SHAPE,
        is_async=True,
    ),
    ServiceBusInput("str", True, messages=(MESSAGE, ServiceBusMessageData(b"two"))),
    ServiceBusInput("sdk", False, binding_data=(b"\x01lock-and-amqp",)),
    ManualServiceBusInput(b"input", str(uuid.uuid4()), NOW, batch=False),
    HttpInput("POST", "http://h/api/x?q=1", {"X-In": "1"}, {"q": "1"}, {"name": "x"}, b"{}"),
    TimerInput(True, {"Last": NOW.isoformat(), "Next": NOW.isoformat()}, {"AdjustForDST": True}),
    InvocationRequest("f", str(uuid.uuid4()), TimerInput(False, {}, {})),
    InvocationOutcome(False, "nope", "KeyError", (("req", "azure.functions._http.HttpRequest"),)),
    InvocationOutcome(True, http=HttpOutput(201, {"X-Seen": "1"}, b"ok", "text/plain; charset=utf-8")),
]


class _PlainUnpickler(pickle.Unpickler):
    """Refuses any class but the protocol's and the standard library's plain values."""

    def find_class(self, module: str, name: str) -> Any:
        if module not in ("devhost.worker_protocol", "datetime", "builtins"):
            raise pickle.UnpicklingError(f"{module}.{name} crossed the boundary")
        return super().find_class(module, name)


def _plain_copy(value: Any) -> Any:
    return _PlainUnpickler(io.BytesIO(pickle.dumps(value))).load()


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_every_protocol_value_survives_pickling_and_carries_no_library_object(value: Any) -> None:
    assert across(value) == value
    assert _plain_copy(value) == value


def test_the_host_learns_each_function_from_the_worker_as_plain_metadata(worker: Worker) -> None:
    functions = {f.name: f for f in worker.channel.functions()}
    # The runtime's ids (uuid5 of the name) and raw bindings, read as the host reads them: an untyped
    # Service Bus trigger is bound as a string.
    assert functions["single"].function_id == str(uuid.uuid5(uuid.NAMESPACE_OID, "single"))
    assert functions["single"].service_bus == ServiceBusShape(
        worker.queues["SINGLE"], worker.queues["SINGLE"], None, None, False, False, None, "str", None
    )
    assert functions["batch"].service_bus is not None and functions["batch"].service_bus.batch
    assert functions["sdk"].service_bus is not None
    assert (functions["sdk"].service_bus.payload, functions["sdk"].service_bus.actions_arg) == (
        "sdk",
        "actions",
    )
    assert functions["echo"].trigger["authLevel"] == "ANONYMOUS"  # the raw binding: the enum's name
    assert functions["echo"].trigger["methods"] == ["POST"]
    assert functions["boom"].is_async and not functions["echo"].is_async
    assert functions["tick"].trigger["schedule"] == "0 */5 * * * *"
    assert _plain_copy(list(functions.values())) == list(functions.values())


# ----------------------------------------------------------------------------------------- Service Bus


def test_a_single_message_becomes_a_func_message_with_the_hosts_metadata(
    worker: Worker, shared_emulator: EmulatorHandle
) -> None:
    sent = ServiceBusMessage("hello", application_properties={"k": "v", "n": 7}, correlation_id="c-1")
    (message,) = _received(shared_emulator, worker.queues["SINGLE"], sent)
    data = ServiceBusInput("str", False, messages=(message_data(message),))

    outcome = worker.invoke("single", data)

    assert outcome.succeeded and outcome.http is None
    assert dict(outcome.bound) == {"msg": FUNC_MESSAGE}  # the context is not a trigger binding
    msg, context = worker.seen["single"]
    assert msg.get_body() == b"hello"
    assert msg.delivery_count == 1  # the host's count: this delivery included
    assert msg.user_properties == {"k": "v", "n": 7} and msg.correlation_id == "c-1"
    assert msg.message_id == str(message.message_id) and msg.lock_token == str(message.lock_token)
    assert msg.metadata["DeliveryCount"] == 1
    assert msg.metadata["UserProperties"] == {"k": "v", "n": 7}
    assert msg.metadata["sys"]["MethodName"] == "single"
    assert context.function_name == "single"


def test_a_single_message_carries_only_the_binding_data_the_service_bus_extension_gives(
    worker: Worker, shared_emulator: EmulatorHandle
) -> None:
    sent = ServiceBusMessage("ttl", time_to_live=timedelta(days=14), subject="s", session_id=None)
    (message,) = _received(shared_emulator, worker.queues["SINGLE"], sent)
    data = ServiceBusInput("str", False, messages=(message_data(message),))

    outcome = worker.invoke("single", data)

    assert outcome.succeeded, outcome.error_detail
    msg, _ = worker.seen["single"]
    # ServiceBusTriggerBindingStrategy.AddBindingData: no TimeToLive, LockedUntil, State or dead-letter
    # reason reach a Python function, whatever the message carries; null values are left out.
    assert set(msg.metadata) == {
        "DeliveryCount",
        "LockToken",
        "ExpiresAtUtc",
        "ExpiresAt",
        "EnqueuedTimeUtc",
        "EnqueuedTime",
        "MessageId",
        "SequenceNumber",
        "Subject",
        "Label",
        "ApplicationProperties",
        "UserProperties",
        "sys",
    }
    assert msg.time_to_live is None and msg.locked_until is None and msg.state is None
    # ExpiresAt.DateTime / EnqueuedTime.DateTime are of kind Unspecified: Json.NET writes them without a
    # zone, and the library makes them naive datetimes.
    assert msg.enqueued_time_utc is not None and msg.enqueued_time_utc.tzinfo is None
    assert msg.enqueued_time_utc == message.enqueued_time_utc.replace(tzinfo=None)
    assert msg.label == "s"


def test_a_batch_becomes_func_messages_sharing_the_hosts_array_metadata(
    worker: Worker, shared_emulator: EmulatorHandle
) -> None:
    sent = [ServiceBusMessage(f"m{i}", application_properties={"i": i}) for i in range(3)]
    messages = _received(shared_emulator, worker.queues["BATCH"], *sent)
    data = ServiceBusInput("str", True, messages=tuple(message_data(m) for m in messages))

    outcome = worker.invoke("batch", data)

    assert outcome.succeeded and dict(outcome.bound) == {"msgs": "builtins.list"}
    batch = worker.seen["batch"]
    assert [m.get_body() for m in batch] == [m.body for m in data.messages]
    assert [m.user_properties for m in batch] == [{"i": int(m.get_body()[1:])} for m in batch]
    assert batch[0].metadata["DeliveryCountArray"] == [1, 1, 1]
    assert batch[0].metadata["UserPropertiesArray"] == [m.user_properties for m in batch]
    assert batch[0].locked_until is None  # a batch message carries only what the host's arrays carry


def test_sdk_types_are_decoded_by_the_extension_from_the_hosts_binding_data(
    worker: Worker, shared_emulator: EmulatorHandle
) -> None:
    ensure_settlement_server()  # the extension's actions client needs the host's address on sys.argv
    (message,) = _received(shared_emulator, worker.queues["SDK"], ServiceBusMessage("sdk-body"))
    data = ServiceBusInput("sdk", False, binding_data=(model_binding_content(message),))

    outcome = worker.invoke("sdk", data)

    assert outcome.succeeded, outcome.error_detail
    assert dict(outcome.bound) == {"message": SDK_MESSAGE, "actions": EXTENSION_ACTIONS}
    decoded = worker.seen["sdk"]
    assert str(decoded) == "sdk-body"
    assert str(decoded.lock_token) == str(message.lock_token)
    assert decoded.delivery_count == 1


def test_a_str_payload_gets_the_body_and_a_manual_run_gets_a_bare_func_message(worker: Worker) -> None:
    outcome = worker.invoke(
        "text", ServiceBusInput("str", False, messages=(ServiceBusMessageData(b"plain"),))
    )
    assert outcome.succeeded and dict(outcome.bound) == {"body": "builtins.str"}
    assert worker.seen["text"] == "plain"

    manual = ManualServiceBusInput(b"typed in", "id-1", NOW, batch=False)
    assert worker.invoke("single", manual).succeeded
    msg, _ = worker.seen["single"]
    assert (msg.get_body(), msg.message_id, msg.delivery_count, msg.user_properties) == (
        b"typed in",
        "id-1",
        1,
        {},
    )


def test_input_that_cannot_be_bound_fails_the_invocation_instead_of_raising(worker: Worker) -> None:
    outcome = worker.invoke("sdk", ServiceBusInput("sdk", False, binding_data=(b"not amqp",)))
    assert not outcome.succeeded and outcome.error_type is not None and outcome.bound == ()
    unknown = worker.invoke("missing", TimerInput(False, {}, {}))
    assert (unknown.succeeded, unknown.error_type) == (False, "LookupError")


# ------------------------------------------------------------------------------------------ HTTP, timer


def test_an_http_function_gets_its_request_and_its_response_comes_back_plain(worker: Worker) -> None:
    request = HttpInput(
        "POST", "http://h/api/echo/ann?q=1", {"x-in": "hi"}, {"q": "1"}, {"name": "ann"}, b"b"
    )

    outcome = worker.invoke("echo", request)

    assert outcome.succeeded and dict(outcome.bound) == {"req": "azure.functions.http.HttpRequest"}
    assert worker.seen["echo"].method == "POST" and worker.seen["echo"].url == "http://h/api/echo/ann?q=1"
    assert outcome.http == HttpOutput(201, {"X-Seen": "hi"}, b"ann:b:1", "text/plain; charset=utf-8")


def test_an_http_function_returning_anything_but_a_response_or_text_fails_as_in_the_runtime(
    worker: Worker,
) -> None:
    request = HttpInput("GET", "http://h/api/x", {}, {}, {}, b"")
    text = worker.invoke("text_reply", request)
    assert text.succeeded and text.http == HttpOutput(200, {}, b"plain", "text/plain; charset=utf-8")
    for function, kind in (("document", "dict"), ("nothing", "NoneType"), ("raw", "bytes")):
        outcome = worker.invoke(function, request)
        unsupported = f'unsupported type "http" for Python type "{kind}"'
        assert outcome.error_detail == f"TypeError: unable to encode outgoing TypedData: {unsupported}"
    boom = worker.invoke("boom", request)
    assert (boom.succeeded, boom.error_detail) == (False, "KeyError: 'nope'")


def test_a_timer_function_gets_its_timer_request(worker: Worker) -> None:
    status = {"Last": NOW.isoformat(), "Next": NOW.isoformat(), "LastUpdated": NOW.isoformat()}

    outcome = worker.invoke("tick", TimerInput(True, status, {"AdjustForDST": True}))

    assert outcome.succeeded and dict(outcome.bound) == {"timer": "azure.functions.timer.TimerRequest"}
    timer = worker.seen["tick"]
    assert (
        timer.past_due is True
        and timer.schedule_status == status
        and timer.schedule == {"AdjustForDST": True}
    )
