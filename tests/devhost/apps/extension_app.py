"""Test app: SDK-type triggers bound by the binding extension, settling over its gRPC client."""

import os
import sys
import typing
import uuid

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from app_records import recorder

app = func.FunctionApp()
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))


class _Stranger:
    """A message whose lock token the host never handed out."""

    lock_token = str(uuid.uuid4())


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%INSPECT_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
def inspects(
    message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    try:
        actions.complete(_Stranger())
        stranger_error = ""
    except servicebus.serviceBusMessageActions.SettlementError as exc:
        stranger_error = f"{exc.original.code()}|{exc.original.details()}"
    actions.renew_message_lock(message)
    record(
        "inspects",
        body=str(message),
        message_class=f"{type(message).__module__}.{type(message).__qualname__}",
        amqp_class=f"{type(message._message).__module__}.{type(message._message).__qualname__}",
        actions_class=f"{type(actions).__module__}.{type(actions).__qualname__}",
        actions_uri=actions._uri,
        worker_argv=sys.argv[1:7],
        properties={str(k): type(v).__name__ for k, v in (message.application_properties or {}).items()},
        lock_token=str(message.lock_token),
        stranger_error=stranger_error,
    )
    actions.complete(message)


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%HOLD_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
def holds(message: servicebus.ServiceBusReceivedMessage) -> None:
    record("holds", body=str(message), delivery_count=message.delivery_count)


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%SESSION_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
    auto_complete_messages=False,
)
def in_session(
    message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    actions.set_session_state(message.session_id, f"state-{message}".encode())
    locked_until = actions.renew_session_lock(message.session_id)
    actions.complete(message)
    record("in_session", body=str(message), session_lock_renewed_until=locked_until.ToJsonString())


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%FAIL_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
def fails_unsettled(
    message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    body = str(message)
    record("fails_unsettled", body=body, delivery_count=message.delivery_count)
    if body.startswith("settled-then-fails"):
        actions.deadletter(message, deadletter_reason="HandledBeforeFailing")
        raise RuntimeError("fails after settling")
    if message.delivery_count == 1:
        raise RuntimeError("fails before settling")
    actions.complete(message)


@app.service_bus_queue_trigger(
    arg_name="messages",
    queue_name="%FAIL_BATCH_QUEUE%",
    connection="ServiceBusConnection",
    cardinality="many",
    auto_complete_messages=False,
)
def fails_batch_unsettled(
    messages: typing.List[servicebus.ServiceBusReceivedMessage], actions: servicebus.ServiceBusMessageActions
) -> None:
    record(
        "fails_batch_unsettled",
        bodies=[str(m) for m in messages],
        delivery_counts=[m.delivery_count for m in messages],
    )
    if all(m.delivery_count > 1 for m in messages):
        for message in messages:
            actions.complete(message)
        return
    for message in messages:
        if str(message).startswith("keep"):
            actions.deadletter(message, deadletter_reason="HandledBeforeFailing")
    raise RuntimeError("the batch fails before settling the rest")
