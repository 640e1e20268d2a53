"""Test app: session, batch and SDK-type (explicit settlement) Service Bus triggers."""

import os
import time
import typing

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from app_records import recorder

app = func.FunctionApp()
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))


@app.service_bus_queue_trigger(
    arg_name="msg", queue_name="%SESSION_QUEUE%", connection="ServiceBusConnection", is_sessions_enabled=True
)
def in_session(msg: func.ServiceBusMessage) -> None:
    started = time.monotonic()
    time.sleep(0.2)
    record(
        "in_session",
        session_id=msg.session_id,
        body=msg.get_body().decode(),
        start=started,
        end=time.monotonic(),
    )


@app.service_bus_topic_trigger(
    arg_name="batch",
    topic_name="%BATCH_TOPIC%",
    subscription_name="%BATCH_SUBSCRIPTION%",
    connection="ServiceBusConnection",
    cardinality="many",
    data_type=func.DataType.STRING,  # string[]: each body as text (without it, object[] through Json.NET)
)
def in_batch(batch: typing.List[func.ServiceBusMessage]) -> None:
    record(
        "in_batch",
        bodies=[m.get_body().decode() for m in batch],
        delivery_counts=[m.delivery_count for m in batch],
        message_ids=[m.message_id for m in batch],
        metadata_keys=sorted(batch[0].metadata or {}),
        locked_until=[m.locked_until for m in batch],
        time_to_live=[m.time_to_live for m in batch],
    )


@app.service_bus_queue_trigger(
    arg_name="received",
    queue_name="%SETTLE_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
def settles_itself(
    received: servicebus.ServiceBusReceivedMessage, message_actions: servicebus.ServiceBusMessageActions
) -> None:
    body = str(received)
    record("settles_itself", body=body, sequence_number=received.sequence_number)
    if body.startswith("poison"):
        message_actions.deadletter(received, deadletter_reason="BadInput", deadletter_error_description=body)
    elif body.startswith("defer"):
        message_actions.defer(received)
    else:
        message_actions.complete(received)


@app.service_bus_queue_trigger(arg_name="text", queue_name="%TEXT_QUEUE%", connection="ServiceBusConnection")
def text_only(text: str) -> None:
    record("text_only", text=text)


@app.service_bus_queue_trigger(
    arg_name="batch",
    queue_name="%UNTYPED_BATCH_QUEUE%",
    connection="ServiceBusConnection",
    cardinality="many",
)
def untyped_batch(batch: typing.List[func.ServiceBusMessage]) -> None:
    record("untyped_batch", bodies=[m.get_body().decode() for m in batch])
