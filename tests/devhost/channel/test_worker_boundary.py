"""The worker boundary: what crosses it is plain and picklable, and a function in the worker process gets
through the channel the objects azure_functions_runtime binds in Azure (Service Bus ``func`` messages single
and batch, the binding extension's SDK types, HTTP requests and responses, timer requests). The test app
writes down what it got (in the worker process) for the test to read."""

from __future__ import annotations

import asyncio
import io
import json
import pickle
import textwrap
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage

from devhost.channel.process_worker import ProcessWorker, WorkerOptions
from devhost.channel.protocol import (
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
from devhost.servicebus.message_reading import message_data
from devhost.servicebus.model_binding_data import model_binding_content
from devhost.servicebus.settlement import worker_arguments
from emulator.testing import EmulatorHandle
from shared.amqp.received import ReceivedMessage
from tests.devhost.conftest import send
from tests.devhost.seam_receiving import receive_as_the_listeners_do

APP = """
import json
import os
import typing

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def seen(function, **what):
    # What the function got, for the test in the host's process: one JSON line, on disk before it returns.
    with open(os.environ["BOUNDARY_RECORD"], "a", encoding="utf-8") as record:
        record.write(json.dumps({"function": function, **what}) + "\\n")


def _message(msg):
    return {
        "body": msg.get_body().decode(),
        "delivery_count": msg.delivery_count,
        "user_properties": msg.user_properties,
        "correlation_id": msg.correlation_id,
        "message_id": msg.message_id,
        "lock_token": msg.lock_token,
        "metadata_keys": sorted(msg.metadata),
        "metadata": {k: msg.metadata[k] for k in ("DeliveryCount", "UserProperties") if k in msg.metadata},
        "method_name": msg.metadata.get("sys", {}).get("MethodName"),
        "time_to_live": repr(msg.time_to_live),
        "locked_until": repr(msg.locked_until),
        "state": repr(msg.state),
        "enqueued_time_utc": None if msg.enqueued_time_utc is None else msg.enqueued_time_utc.isoformat(),
        "enqueued_zone": repr(None if msg.enqueued_time_utc is None else msg.enqueued_time_utc.tzinfo),
        "label": msg.label,
    }


@app.service_bus_queue_trigger(arg_name="msg", queue_name="%SINGLE%", connection="Sb")
def single(msg: func.ServiceBusMessage, context: func.Context) -> None:
    seen("single", message=_message(msg), context_function=context.function_name)


@app.service_bus_queue_trigger(arg_name="msgs", queue_name="%BATCH%", connection="Sb", cardinality="many")
def batch(msgs: typing.List[func.ServiceBusMessage]) -> None:
    seen(
        "batch",
        bodies=[m.get_body().decode() for m in msgs],
        user_properties=[m.user_properties for m in msgs],
        delivery_counts=msgs[0].metadata["DeliveryCountArray"],
        user_properties_array=msgs[0].metadata["UserPropertiesArray"],
        first_locked_until=repr(msgs[0].locked_until),
    )


@app.service_bus_queue_trigger(arg_name="message", queue_name="%SDK%", connection="Sb")
def sdk(message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions) -> None:
    seen(
        "sdk",
        body=str(message),
        lock_token=str(message.lock_token),
        delivery_count=message.delivery_count,
    )


@app.service_bus_queue_trigger(arg_name="body", queue_name="%SDK%", connection="Sb")
def text(body: str) -> None:
    seen("text", body=body)


@app.route(route="echo/{name}", methods=["POST"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    seen("echo", method=req.method, url=req.url)
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
    seen("tick", past_due=timer.past_due, schedule_status=timer.schedule_status, schedule=timer.schedule)
"""

FUNC_MESSAGE = "azure.functions.servicebus.ServiceBusMessage"
RUNTIME_CONTEXT = "azure_functions_runtime.bindings.context.Context"
SDK_MESSAGE = "azure.servicebus._common.message.ServiceBusReceivedMessage"
EXTENSION_ACTIONS = (
    "azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions.ServiceBusMessageActions"
)


@dataclass
class Worker:
    """The app in a worker process, driven through the host's channel from a loop of its own."""

    channel: ProcessWorker
    loop: asyncio.AbstractEventLoop
    record: Path  # what the app's functions got, one JSON line per call
    queues: dict[str, str]

    def invoke(self, name: str, data: InvocationInput) -> InvocationOutcome:
        request = InvocationRequest(name, str(uuid.uuid4()), data)
        return asyncio.run_coroutine_threadsafe(self.channel.invoke(request), self.loop).result(60)

    def seen(self, function: str) -> dict[str, Any]:
        """What ``function`` got in its last call."""
        lines = self.record.read_text(encoding="utf-8").splitlines() if self.record.exists() else []
        calls: list[dict[str, Any]] = [
            entry for entry in map(json.loads, lines) if entry["function"] == function
        ]
        assert calls, f"{function} recorded nothing"
        return calls[-1]


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, shared_emulator: EmulatorHandle) -> Iterator[Worker]:
    folder = tmp_path_factory.mktemp("boundary")
    path = folder / "function_app.py"
    path.write_text(textwrap.dedent(APP), encoding="utf-8")
    record = folder / "seen.jsonl"
    queues = {"SINGLE": "", "BATCH": "", "SDK": ""}
    queues = {name: shared_emulator.create_queue(lock_duration=timedelta(seconds=30)) for name in queues}
    settings = {"Sb": shared_emulator.connection_string, "BOUNDARY_RECORD": str(record), **queues}
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="boundary-host", daemon=True)
    thread.start()
    try:
        # No Settlement service answers: these functions never settle (the actions client connects lazily).
        start = ProcessWorker.start(WorkerOptions(path, settings), worker_arguments(1))
        channel = asyncio.run_coroutine_threadsafe(start, loop).result(120)
        try:
            yield Worker(channel, loop, record, queues)
        finally:
            asyncio.run_coroutine_threadsafe(channel.close(), loop).result(60)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def _received(emulator: EmulatorHandle, queue: str, *messages: ServiceBusMessage) -> list[ReceivedMessage]:
    """Send ``messages`` and receive them locked, as devhost's listeners do (they are never settled: the
    queue is this module's, and they stay locked past the test)."""
    send(emulator.connection_string, queue, *messages)
    return receive_as_the_listeners_do(emulator.connection_string, queue, len(messages), complete=False)


# ------------------------------------------------------------------------------------------- pickling

SHAPE = ServiceBusShape("q", "q", None, None, False, True, None, "str")
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
        if module not in ("devhost.channel.protocol", "datetime", "builtins"):
            raise pickle.UnpicklingError(f"{module}.{name} crossed the boundary")
        return super().find_class(module, name)


def _plain_copy(value: Any) -> Any:
    return _PlainUnpickler(io.BytesIO(pickle.dumps(value))).load()


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_every_protocol_value_survives_pickling_and_carries_no_library_object(value: Any) -> None:
    assert _plain_copy(value) == value


def test_the_host_learns_each_function_from_the_worker_as_plain_metadata(worker: Worker) -> None:
    functions = {f.name: f for f in worker.channel.functions()}
    # The runtime's ids (uuid5 of the name) and raw bindings, read as the host reads them: an untyped
    # Service Bus trigger is bound as a string.
    assert functions["single"].function_id == str(uuid.uuid5(uuid.NAMESPACE_OID, "single"))
    assert functions["single"].service_bus == ServiceBusShape(
        worker.queues["SINGLE"], worker.queues["SINGLE"], None, None, False, False, None, "str"
    )
    assert functions["batch"].service_bus is not None and functions["batch"].service_bus.batch
    assert functions["sdk"].service_bus is not None
    assert functions["sdk"].service_bus.payload == "sdk"
    assert functions["echo"].trigger["authLevel"] == "ANONYMOUS"  # the raw binding: the enum's name
    assert functions["echo"].trigger["methods"] == ["POST"]
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
    # The runtime binds the message and gives the function its own context, as in Azure.
    assert dict(outcome.bound) == {"msg": FUNC_MESSAGE, "context": RUNTIME_CONTEXT}
    seen = worker.seen("single")
    msg = seen["message"]
    assert msg["body"] == "hello"
    assert msg["delivery_count"] == 1  # the host's count: this delivery included
    assert msg["user_properties"] == {"k": "v", "n": 7} and msg["correlation_id"] == "c-1"
    assert msg["message_id"] == str(message.message_id) and msg["lock_token"] == str(message.lock_token)
    assert msg["metadata"]["DeliveryCount"] == 1
    assert msg["metadata"]["UserProperties"] == {"k": "v", "n": 7}
    assert msg["method_name"] == "single"
    assert seen["context_function"] == "single"


def test_a_single_message_carries_only_the_binding_data_the_service_bus_extension_gives(
    worker: Worker, shared_emulator: EmulatorHandle
) -> None:
    sent = ServiceBusMessage("ttl", time_to_live=timedelta(days=14), subject="s", session_id=None)
    (message,) = _received(shared_emulator, worker.queues["SINGLE"], sent)
    data = ServiceBusInput("str", False, messages=(message_data(message),))

    outcome = worker.invoke("single", data)

    assert outcome.succeeded, outcome.error_detail
    msg = worker.seen("single")["message"]
    # ServiceBusTriggerBindingStrategy.AddBindingData: no TimeToLive, LockedUntil, State or dead-letter
    # reason reach a Python function, whatever the message carries; null values are left out.
    assert set(msg["metadata_keys"]) == {
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
    assert (msg["time_to_live"], msg["locked_until"], msg["state"]) == ("None", "None", "None")
    # ExpiresAt.DateTime / EnqueuedTime.DateTime are of kind Unspecified: Json.NET writes them without a
    # zone, and the library makes them naive datetimes.
    assert msg["enqueued_time_utc"] is not None and msg["enqueued_zone"] == "None"
    assert message.enqueued_time_utc is not None
    assert msg["enqueued_time_utc"] == message.enqueued_time_utc.replace(tzinfo=None).isoformat()
    assert msg["label"] == "s"


def test_a_batch_becomes_func_messages_sharing_the_hosts_array_metadata(
    worker: Worker, shared_emulator: EmulatorHandle
) -> None:
    sent = [ServiceBusMessage(f"m{i}", application_properties={"i": i}) for i in range(3)]
    messages = _received(shared_emulator, worker.queues["BATCH"], *sent)
    data = ServiceBusInput("str", True, messages=tuple(message_data(m) for m in messages))

    outcome = worker.invoke("batch", data)

    assert outcome.succeeded and dict(outcome.bound) == {"msgs": "builtins.list"}
    batch = worker.seen("batch")
    assert [body.encode() for body in batch["bodies"]] == [m.body for m in data.messages]
    assert batch["user_properties"] == [{"i": int(body[1:])} for body in batch["bodies"]]
    assert batch["delivery_counts"] == [1, 1, 1]
    assert batch["user_properties_array"] == batch["user_properties"]
    assert batch["first_locked_until"] == "None"  # a batch message carries only what the host's arrays carry


def test_sdk_types_are_decoded_by_the_extension_from_the_hosts_binding_data(
    worker: Worker, shared_emulator: EmulatorHandle
) -> None:
    (message,) = _received(shared_emulator, worker.queues["SDK"], ServiceBusMessage("sdk-body"))
    data = ServiceBusInput("sdk", False, binding_data=(model_binding_content(message),))

    outcome = worker.invoke("sdk", data)

    assert outcome.succeeded, outcome.error_detail
    assert dict(outcome.bound) == {"message": SDK_MESSAGE, "actions": EXTENSION_ACTIONS}
    decoded = worker.seen("sdk")
    assert decoded["body"] == "sdk-body"
    assert decoded["lock_token"] == str(message.lock_token)
    assert decoded["delivery_count"] == 1


def test_a_str_payload_gets_the_body_and_a_manual_run_gets_a_bare_func_message(worker: Worker) -> None:
    outcome = worker.invoke(
        "text", ServiceBusInput("str", False, messages=(ServiceBusMessageData(b"plain"),))
    )
    assert outcome.succeeded and dict(outcome.bound) == {"body": "builtins.str"}
    assert worker.seen("text")["body"] == "plain"

    manual = ManualServiceBusInput(b"typed in", "id-1", NOW, batch=False)
    assert worker.invoke("single", manual).succeeded
    msg = worker.seen("single")["message"]
    assert (msg["body"], msg["message_id"], msg["delivery_count"], msg["user_properties"]) == (
        "typed in",
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
    assert worker.seen("echo") == {"function": "echo", "method": "POST", "url": "http://h/api/echo/ann?q=1"}
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
    timer = worker.seen("tick")
    assert (
        timer["past_due"] is True
        and timer["schedule_status"] == status
        and timer["schedule"] == {"AdjustForDST": True}
    )
