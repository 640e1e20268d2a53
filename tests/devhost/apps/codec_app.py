"""Test app: a plain and an SDK-type trigger, each recording every message it is handed, for messages whose
application properties the Python SDKs cannot decode (AMQP char and decimal)."""

import os

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from app_records import recorder

app = func.FunctionApp()
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))


@app.service_bus_queue_trigger(
    arg_name="message", queue_name="%PLAIN_QUEUE%", connection="ServiceBusConnection"
)
def plain_reads(message: func.ServiceBusMessage) -> None:
    record(
        "plain_reads",
        body=message.get_body().decode(),
        properties=message.application_properties,
        delivery_count=message.delivery_count,
    )


@app.service_bus_queue_trigger(
    arg_name="message", queue_name="%SDK_QUEUE%", connection="ServiceBusConnection"
)
def sdk_reads(message: servicebus.ServiceBusReceivedMessage) -> None:
    record("sdk_reads", body=str(message), delivery_count=message.delivery_count)
